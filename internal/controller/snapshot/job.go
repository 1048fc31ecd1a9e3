// Package snapshot is the EtcdSnapshot controller: it runs one Job per snapshot (the
// operator's own image, `etcd-operator snapshot-agent`), reads the Job's result from its Pod's
// termination message into the EtcdSnapshot's status, and removes the stored file with the
// EtcdSnapshot when its deletionPolicy is Delete.
package snapshot

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent"
	"github.com/quorumkeeper/etcd-operator/internal/backup"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// DefaultDeadlineSeconds bounds a snapshot whose spec sets no deadline.
const DefaultDeadlineSeconds = 1800

const (
	agentUser   = 65532
	tlsCADir    = "/etc/etcd/server-ca"
	tlsCertDir  = "/etc/etcd/client-tls"
	snapshotDir = "/snapshots"
	scratchDir  = "/scratch"
)

// Job actions.
const (
	ActionSnapshot = "snapshot"
	ActionDelete   = "delete"
)

// JobName is the agent Job of a snapshot for an action; short enough for any snapshot name
// (a Job's Pods get a suffix and must stay under 63 characters in their label).
func JobName(snapshot, action string) string {
	name := snapshot
	if len(name) > 40 {
		name = name[:40]
	}
	return strings.TrimSuffix(name, "-") + "-" + action + "-" + shortHash(snapshot)
}

func shortHash(s string) string {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return strconv.FormatUint(uint64(h), 36)
}

// DeadlineSeconds of a snapshot.
func DeadlineSeconds(s *etcdv1.EtcdSnapshot) int64 {
	if s.Spec.ActiveDeadlineSeconds != nil {
		return *s.Spec.ActiveDeadlineSeconds
	}
	return DefaultDeadlineSeconds
}

// StoredFile is where a snapshot's file is: where its status.artifact says it was stored,
// when that names a file of this snapshot (one stored under an earlier key layout keeps its
// key), else where this operator puts it.
func StoredFile(s *etcdv1.EtcdSnapshot) etcdv1.SnapshotLocation {
	if a := s.Status.Artifact; a != nil {
		if loc, ok := backup.LocationOf(s.Spec.Destination, backup.Of(s), a.URI); ok {
			return loc
		}
	}
	return backup.FileLocation(s.Spec.Destination, backup.Of(s))
}

// StoredName is the S3 key or the path in the volume of a snapshot's file (StoredFile).
func StoredName(s *etcdv1.EtcdSnapshot) string {
	if f := StoredFile(s); f.S3 != nil {
		return f.S3.Key
	}
	return StoredFile(s).PVC.SubPath
}

// AgentJob is the Job that takes the snapshot (action snapshot) or deletes its stored file
// (action delete). It runs as non-root with a read-only root filesystem and no
// service-account token; secrets reach it as files and environment variables from Secrets,
// never in its arguments.
func AgentJob(s *etcdv1.EtcdSnapshot, c *etcdv1.EtcdCluster, image, action string) *batchv1.Job {
	deadline := DeadlineSeconds(s)
	args := []string{"snapshot-agent",
		"--name=" + StoredName(s),
		"--uri=" + backup.URI(StoredFile(s)),
		// The agent stops a little before the Job's deadline so it can still report why.
		fmt.Sprintf("--timeout=%ds", max(deadline-10, 20)),
	}
	// The owner is recorded with the file, and a delete removes only a file of this owner.
	args = append(args, "--owner="+backup.OwnerOf(s.Namespace, s.Name, string(s.UID)))
	if action == ActionDelete {
		args = append(args, "--delete")
		if s.Status.Artifact != nil && s.Status.Artifact.Checksum != "" {
			// Proves a file stored before owners were recorded this snapshot's own.
			args = append(args, "--checksum="+s.Status.Artifact.Checksum)
		}
	}
	var env []corev1.EnvVar
	var mounts []corev1.VolumeMount
	var vols []corev1.Volume
	if action == ActionSnapshot && c != nil {
		args = append(args, etcdArgs(c)...)
		args = append(args, "--scratch-dir="+scratchDir)
		mounts = append(mounts, corev1.VolumeMount{Name: "scratch", MountPath: scratchDir})
		vols = append(vols, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		env = append(env, passwordEnv(c)...)
		m, v := tlsVolumes(c)
		mounts, vols = append(mounts, m...), append(vols, v...)
	}
	sa, se, sm, sv := storeArgs(s.Spec.Destination)
	args, env, mounts, vols = append(args, sa...), append(env, se...), append(mounts, sm...), append(vols, sv...)
	labels := map[string]string{etcdv1.LabelSnapshot: s.Name, etcdv1.LabelSnapshotUID: string(s.UID), etcdv1.LabelAction: action, etcdv1.LabelManagedBy: specs.ManagerName}
	if action == ActionSnapshot && c != nil {
		maps.Copy(labels, specs.SnapshotAgentLabels(c.Name)) // the cluster's NetworkPolicy admits it
	}
	meta := metav1.ObjectMeta{Name: JobName(s.Name, action), Namespace: s.Namespace, Labels: labels}
	return agentJob(meta, deadline, corev1.Container{Image: image, Args: args, Env: env, VolumeMounts: mounts}, vols, clusterPullSecrets(c))
}

// agentJob is a Job of one agent container (its args, env and mounts given) in the operator's
// image: run once, as non-root with a read-only root filesystem and no service-account token,
// its result in the container's termination message.
func agentJob(meta metav1.ObjectMeta, deadline int64, agent corev1.Container, vols []corev1.Volume, pullSecrets []corev1.LocalObjectReference) *batchv1.Job {
	agent.Name, agent.TerminationMessagePolicy = "agent", corev1.TerminationMessageReadFile
	agent.SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	return &batchv1.Job{
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr(int32(0)),
			ActiveDeadlineSeconds:   ptr(deadline),
			TTLSecondsAfterFinished: ptr(int32(3600)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: meta.Labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr(false),
					EnableServiceLinks:           ptr(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(agentUser)), RunAsGroup: ptr(int64(agentUser)),
						FSGroup:        ptr(int64(agentUser)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers:       []corev1.Container{agent},
					Volumes:          vols,
					ImagePullSecrets: pullSecrets,
				},
			},
		},
	}
}

func clusterPullSecrets(c *etcdv1.EtcdCluster) []corev1.LocalObjectReference {
	if c == nil {
		return nil
	}
	return append([]corev1.LocalObjectReference(nil), c.Spec.ImagePullSecrets...)
}

// etcdArgs point the agent at the cluster's client Service with its TLS files.
func etcdArgs(c *etcdv1.EtcdCluster) []string {
	scheme := "http"
	if specs.ClientTLS(c) {
		scheme = "https"
	}
	args := []string{fmt.Sprintf("--endpoints=%s://%s.%s.svc:%d", scheme, specs.ClientServiceName(c.Name), c.Namespace, specs.ClientPort)}
	if specs.ClientTLS(c) {
		args = append(args, "--ca-file="+tlsCADir+"/"+specs.SecretKeyCA)
		if specs.OperatorClientSecretName(c) != "" {
			args = append(args, "--cert-file="+tlsCertDir+"/"+specs.SecretKeyCert, "--key-file="+tlsCertDir+"/"+specs.SecretKeyKey)
		}
	}
	return args
}

func tlsVolumes(c *etcdv1.EtcdCluster) ([]corev1.VolumeMount, []corev1.Volume) {
	if !specs.ClientTLS(c) {
		return nil, nil
	}
	mounts := []corev1.VolumeMount{{Name: "server-ca", MountPath: tlsCADir, ReadOnly: true}}
	vols := []corev1.Volume{secretVolume("server-ca", specs.ServerSecretName(c), specs.SecretKeyCA)}
	if name := specs.OperatorClientSecretName(c); name != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: "client-tls", MountPath: tlsCertDir, ReadOnly: true})
		vols = append(vols, secretVolume("client-tls", name, specs.SecretKeyCert, specs.SecretKeyKey))
	}
	return mounts, vols
}

func secretVolume(name, secret string, keys ...string) corev1.Volume {
	items := make([]corev1.KeyToPath, 0, len(keys))
	for _, k := range keys {
		items = append(items, corev1.KeyToPath{Key: k, Path: k})
	}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secret, Items: items, DefaultMode: ptr(int32(0o440)),
	}}}
}

// passwordEnv gives the agent root's passwords (the last applied and the wanted one) when the
// cluster has auth.
func passwordEnv(c *etcdv1.EtcdCluster) []corev1.EnvVar {
	if c.Spec.Auth == nil || !c.Spec.Auth.Enabled || c.Spec.Auth.RootCredentialsSecretRef == nil {
		return nil
	}
	return []corev1.EnvVar{
		specs.SecretEnv(agent.EnvAppliedPassword, specs.RootAppliedSecretName(c.Name), "password", true),
		specs.SecretEnv(agent.EnvPassword, c.Spec.Auth.RootCredentialsSecretRef.Name, "password", true),
	}
}

func storeArgs(loc etcdv1.SnapshotLocation) ([]string, []corev1.EnvVar, []corev1.VolumeMount, []corev1.Volume) {
	return specs.SnapshotStoreArgs(loc, snapshotDir, false)
}

func ptr[T any](v T) *T { return &v }
