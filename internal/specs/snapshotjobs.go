package specs

import (
	"maps"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent/request"
	"github.com/quorumkeeper/etcd-operator/internal/carotation"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// DefaultSnapshotDeadlineSeconds bounds a snapshot whose spec sets no deadline.
const DefaultSnapshotDeadlineSeconds = 1800

// Paths and user of the agent Jobs.
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
	// ActionVerify names the Job that reads a snapshot's stored file whole before a cluster
	// is rebuilt from it (`etcd-operator verify-agent`).
	ActionVerify = "verify"
)

// SnapshotJobName is the agent Job of a snapshot for an action; short enough for any
// snapshot name (a Job's Pods get a suffix and must stay under 63 characters in their label).
func SnapshotJobName(snapshot, action string) string {
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

// VerifyJobName is the verify Job of cluster for the EtcdSnapshot named snapshot.
func VerifyJobName(cluster, snapshot string) string {
	return SnapshotJobName(cluster+"-"+snapshot, ActionVerify)
}

// SnapshotDeadlineSeconds of a snapshot.
func SnapshotDeadlineSeconds(s *etcdv1.EtcdSnapshot) int64 {
	if s.Spec.ActiveDeadlineSeconds != nil {
		return *s.Spec.ActiveDeadlineSeconds
	}
	return DefaultSnapshotDeadlineSeconds
}

// agentTimeout is the agent's --timeout for a Job's deadline: a little shorter, so that the
// agent can still report why it stopped.
func agentTimeout(deadlineSeconds int64) time.Duration {
	return time.Duration(max(deadlineSeconds-10, 20)) * time.Second
}

// StoredSnapshotFile is where a snapshot's file is: where its status.artifact says it was
// stored, when that names a file of this snapshot (one stored under an earlier key layout
// keeps its key), else where this operator puts it.
func StoredSnapshotFile(s *etcdv1.EtcdSnapshot) etcdv1.SnapshotLocation {
	if a := s.Status.Artifact; a != nil {
		if loc, ok := snapshotstore.LocationOf(s.Spec.Destination, snapshotstore.Of(s), a.URI); ok {
			return loc
		}
	}
	return snapshotstore.FileLocation(s.Spec.Destination, snapshotstore.Of(s))
}

// StoredSnapshotName is the S3 key or the path in the volume of a snapshot's file
// (StoredSnapshotFile).
func StoredSnapshotName(s *etcdv1.EtcdSnapshot) string {
	return SourceName(StoredSnapshotFile(s))
}

// SnapshotJob is the Job that takes the snapshot (action snapshot) or deletes its stored file
// (action delete). It runs as non-root with a read-only root filesystem, as the ServiceAccount
// the destination names (workload identity) or, taking the snapshot, as the one the operator
// made for it (SnapshotAgentAccess); only the Job that takes the snapshot has an API token,
// short-lived, to write its progress. Secrets reach it as files and environment variables
// from Secrets, never in its arguments.
func SnapshotJob(s *etcdv1.EtcdSnapshot, c *etcdv1.EtcdCluster, image, action string) *batchv1.Job {
	deadline := SnapshotDeadlineSeconds(s)
	req := request.Snapshot{
		Name: StoredSnapshotName(s), URI: snapshotstore.URI(StoredSnapshotFile(s)),
		// The owner is recorded with the file, and a delete removes only a file of this owner.
		Owner: snapshotstore.OwnerOf(s.Namespace, s.Name, string(s.UID)),
		Run:   request.Run{Timeout: agentTimeout(deadline)},
	}
	if action == ActionDelete {
		req.Delete = true
		if s.Status.Artifact != nil {
			// Proves a file stored before owners were recorded this snapshot's own.
			req.Checksum = s.Status.Artifact.Checksum
		}
	}
	var env []corev1.EnvVar
	var mounts []corev1.VolumeMount
	var vols []corev1.Volume
	takes := action == ActionSnapshot && c != nil
	serviceAccount := StoreServiceAccount(s.Spec.Destination)
	if takes {
		req.Endpoints, req.CAFile, req.CertFile, req.KeyFile = etcdClientOf(c)
		req.ScratchDir, req.ReportProgress = scratchDir, true
		limit := ScratchSizeLimit(c)
		mounts = append(mounts, corev1.VolumeMount{Name: "scratch", MountPath: scratchDir})
		vols = append(vols, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}})
		env = append(env, passwordEnv(c)...)
		m, v := tlsVolumes(c)
		mounts, vols = append(mounts, m...), append(vols, v...)
		apiMount, apiVol := apiAccess()
		mounts, vols = append(mounts, apiMount), append(vols, apiVol)
		serviceAccount = SnapshotAgentServiceAccount(s)
	}
	store, se, sm, sv := snapshotStore(s.Spec.Destination, snapshotDir, false)
	req.Store, env, mounts, vols = store, append(env, se...), append(mounts, sm...), append(vols, sv...)
	labels := map[string]string{etcdv1.LabelSnapshot: s.Name, etcdv1.LabelSnapshotUID: string(s.UID), etcdv1.LabelAction: action, etcdv1.LabelManagedBy: ManagerName}
	if takes {
		maps.Copy(labels, SnapshotAgentLabels(c.Name)) // the cluster's NetworkPolicy admits it
	}
	meta := WithAdditionalMetadata(c, metav1.ObjectMeta{Name: SnapshotJobName(s.Name, action), Namespace: s.Namespace, Labels: labels})
	agent := corev1.Container{Image: image, Args: req.Args(), Env: env, VolumeMounts: mounts, Resources: AgentResources(s.Spec.Resources)}
	return agentJob(meta, deadline, agent, agentPod{vols: vols, pullSecrets: clusterPullSecrets(c), serviceAccount: serviceAccount, annotations: orNil(withMetadata(nil, extraAnnotations(c)))})
}

// VerifyJob reads the file a member would restore (restore, as the recovery records it: the
// EtcdSnapshot's location, name and checksum) whole, with the restore's flags, credentials
// and read-only mount, so that what it proves readable is what the restore will read. It
// lives in the cluster's namespace and is owned by the cluster (the caller sets that).
func VerifyJob(c *etcdv1.EtcdCluster, s *etcdv1.EtcdSnapshot, restore etcdv1.MemberRestore, image string) *batchv1.Job {
	deadline := SnapshotDeadlineSeconds(s)
	store, env, mounts, vols := snapshotStore(restore.Source, snapshotDir, true)
	req := request.Verify{
		Name: SourceName(restore.Source), URI: SourceURI(restore.Source), Checksum: restore.Checksum,
		Store: store, Run: request.Run{Timeout: agentTimeout(deadline)},
	}
	meta := WithAdditionalMetadata(c, metav1.ObjectMeta{
		Name: VerifyJobName(c.Name, s.Name), Namespace: c.Namespace,
		Labels: map[string]string{etcdv1.LabelVerifyCluster: c.Name, etcdv1.LabelVerifySnapshotUID: string(s.UID),
			etcdv1.LabelAction: ActionVerify, etcdv1.LabelManagedBy: ManagerName},
		Annotations: map[string]string{etcdv1.AnnotationVerifiedSum: restore.Checksum},
	})
	agent := corev1.Container{Image: image, Args: req.Args(), Env: env, VolumeMounts: mounts, Resources: AgentResources(s.Spec.Resources)}
	return agentJob(meta, deadline, agent, agentPod{vols: vols, pullSecrets: clusterPullSecrets(c), serviceAccount: StoreServiceAccount(restore.Source), annotations: orNil(withMetadata(nil, extraAnnotations(c)))})
}

// agentPod is what an agent Job's Pod has beside its container.
type agentPod struct {
	vols        []corev1.Volume
	pullSecrets []corev1.LocalObjectReference
	// serviceAccount is the Pod's; "" for the namespace's default.
	serviceAccount string
	// annotations are the Pod's: the cluster's spec.additionalMetadata (its labels are the
	// Job's).
	annotations map[string]string
}

// agentJob is a Job of one agent container (its args, env, mounts and resources given) in
// the operator's image: run once, as non-root with a read-only root filesystem and without
// the automounted service-account token, its result in the container's termination message.
func agentJob(meta metav1.ObjectMeta, deadline int64, agent corev1.Container, pod agentPod) *batchv1.Job {
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
				ObjectMeta: metav1.ObjectMeta{Labels: meta.Labels, Annotations: pod.annotations},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					ServiceAccountName:           pod.serviceAccount,
					AutomountServiceAccountToken: ptr(false),
					EnableServiceLinks:           ptr(false),
					SecurityContext:              agentPodSecurityContext(),
					Containers:                   []corev1.Container{agent},
					Volumes:                      pod.vols,
					ImagePullSecrets:             pod.pullSecrets,
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

// etcdClientOf points the agent at the cluster's client Service, with the TLS files
// tlsVolumes mounts: the CA with client TLS, the operator's client certificate with mutual
// TLS.
func etcdClientOf(c *etcdv1.EtcdCluster) (endpoints []string, caFile, certFile, keyFile string) {
	scheme := "http"
	if ClientTLS(c) {
		scheme = "https"
		caFile = tlsCADir + "/" + SecretKeyCA
		if OperatorClientSecretName(c) != "" {
			certFile, keyFile = tlsCertDir+"/"+SecretKeyCert, tlsCertDir+"/"+SecretKeyKey
		}
	}
	endpoint := scheme + "://" + ClientServiceName(c.Name) + "." + c.Namespace + ".svc:" + strconv.Itoa(ClientPort)
	return []string{endpoint}, caFile, certFile, keyFile
}

func tlsVolumes(c *etcdv1.EtcdCluster) ([]corev1.VolumeMount, []corev1.Volume) {
	if !ClientTLS(c) {
		return nil, nil
	}
	mounts := []corev1.VolumeMount{{Name: "server-ca", MountPath: tlsCADir, ReadOnly: true}}
	vols := []corev1.Volume{serverCAVolume(c)}
	if name := OperatorClientSecretName(c); name != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: "client-tls", MountPath: tlsCertDir, ReadOnly: true})
		vols = append(vols, secretVolume("client-tls", name, SecretKeyCert, SecretKeyKey))
	}
	return mounts, vols
}

// serverCAVolume holds, as ca.crt, the CAs an agent trusts for the members' server
// certificates: the server Secret's ca.crt; while a CA rotation moves the server certificates
// and its bundle is written, the bundle's server CAs instead (the old and the new, then the new
// alone), as the operator's own client trusts them, so that a member still serving the old
// certificate and one serving the new are both reached.
func serverCAVolume(c *etcdv1.EtcdCluster) corev1.Volume {
	if r := c.Status.CARotation; !carotation.Active(r) || r.BundleHash == "" {
		return secretVolume("server-ca", ServerSecretName(c), SecretKeyCA)
	}
	v := secretVolume("server-ca", CABundleSecretName(c.Name), CABundleKeyServer)
	v.Secret.Items[0].Path = SecretKeyCA
	return v
}

// passwordEnv gives the agent root's passwords (the last applied and the wanted one) when the
// cluster has auth.
func passwordEnv(c *etcdv1.EtcdCluster) []corev1.EnvVar {
	if c.Spec.Auth == nil || !c.Spec.Auth.Enabled || c.Spec.Auth.RootCredentialsSecretRef == nil {
		return nil
	}
	return []corev1.EnvVar{
		SecretEnv(request.EnvRootPasswordApplied, RootAppliedSecretName(c.Name), "password", true),
		SecretEnv(request.EnvRootPassword, c.Spec.Auth.RootCredentialsSecretRef.Name, "password", true),
	}
}

// agentPodSecurityContext is the Pod security context of every agent (snapshot, restore and
// archiver): non-root as the image's user, which also owns the volumes, under the runtime's
// default seccomp profile.
func agentPodSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(agentUser)), RunAsGroup: ptr(int64(agentUser)),
		FSGroup:        ptr(int64(agentUser)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}
