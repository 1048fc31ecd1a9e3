package specs

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent/request"
)

// Paths of the restore init containers.
const (
	agentDir          = "/agent"
	agentBinary       = agentDir + "/etcd-operator"
	restoreSourceDir  = "/snapshot-source"
	restoreStagingDir = DataDir + "/restore"
	// RestoreContainerName is the init container that restores the snapshot; its
	// termination message is the restore agent's JSON result.
	RestoreContainerName = "restore"
)

// SnapshotNeededBy says which of the clusters (of the EtcdSnapshot's namespace) may still
// restore the EtcdSnapshot named snapshot, of the EtcdSnapshotSchedule schedule ("" for
// none), and why; empty when none: a cluster asking to be rebuilt from it
// (AnnotationRecoverFromSnapshot, until the rebuilt cluster answers and the operator removes
// the request), one being rebuilt from it (status.snapshotRecovery), one whose
// spec.bootstrap.restore names it and that has not formed yet (no status.clusterID), or one
// not formed yet that restores to a target from its schedule (it may take any of the
// schedule's snapshots as its base). A cluster being deleted restores nothing.
func SnapshotNeededBy(snapshot, schedule string, clusters []etcdv1.EtcdCluster) []string {
	var users []string
	for i := range clusters {
		c := &clusters[i]
		if !c.DeletionTimestamp.IsZero() {
			continue
		}
		switch {
		case c.Status.SnapshotRecovery != nil && c.Status.SnapshotRecovery.Snapshot == snapshot:
			users = append(users, fmt.Sprintf("EtcdCluster %s is being rebuilt from it", c.Name))
		case c.Annotations[etcdv1.AnnotationRecoverFromSnapshot] == snapshot:
			users = append(users, fmt.Sprintf("EtcdCluster %s asks to be rebuilt from it (%s)", c.Name, etcdv1.AnnotationRecoverFromSnapshot))
		case c.Status.ClusterID == "" && BootstrapSnapshot(c) == snapshot:
			users = append(users, fmt.Sprintf("EtcdCluster %s bootstraps from it (spec.bootstrap.restore.source.snapshotRef) and has not formed yet", c.Name))
		case c.Status.ClusterID == "" && schedule != "" && BootstrapSchedule(c) == schedule:
			users = append(users, fmt.Sprintf("EtcdCluster %s restores to a target from its schedule (spec.bootstrap.restore.source.scheduleRef) and has not formed yet", c.Name))
		}
	}
	return users
}

// BootstrapSnapshot is the EtcdSnapshot the cluster's spec.bootstrap.restore names; "" when
// it names none.
func BootstrapSnapshot(c *etcdv1.EtcdCluster) string {
	if b := c.Spec.Bootstrap; b != nil && b.Restore != nil && b.Restore.Source.SnapshotRef != nil {
		return b.Restore.Source.SnapshotRef.Name
	}
	return ""
}

// BootstrapSchedule is the EtcdSnapshotSchedule the cluster's spec.bootstrap.restore restores
// to a target from; "" when it names none.
func BootstrapSchedule(c *etcdv1.EtcdCluster) string {
	if b := c.Spec.Bootstrap; b != nil && b.Restore != nil && b.Restore.Source.ScheduleRef != nil {
		return b.Restore.Source.ScheduleRef.Name
	}
	return ""
}

// SnapshotsNamedBy lists every EtcdSnapshot the cluster names as something to restore,
// needed or not: what a change of the cluster may have changed SnapshotNeededBy for.
func SnapshotsNamedBy(c *etcdv1.EtcdCluster) []string {
	var names []string
	for _, name := range []string{c.Annotations[etcdv1.AnnotationRecoverFromSnapshot], BootstrapSnapshot(c)} {
		if name != "" {
			names = append(names, name)
		}
	}
	if rec := c.Status.SnapshotRecovery; rec != nil {
		names = append(names, rec.Snapshot)
	}
	return names
}

// Restores reports whether a member starts from a snapshot: the founding member of a cluster
// rebuilt from an EtcdSnapshot (its own spec.bootstrap.restore), or a founding member of a
// cluster with spec.bootstrap.restore. Members added later join the restored cluster and get
// its data from the leader.
func Restores(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) bool {
	_, ok := restoreOf(c, m)
	return ok
}

// restoreOf is the snapshot a member restores: its own (a recovery from an EtcdSnapshot names
// it on the member, and it wins over the cluster's first bootstrap), or the cluster's
// spec.bootstrap.restore for a founding member.
func restoreOf(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (etcdv1.MemberRestore, bool) {
	if m.Spec.Bootstrap.InitialClusterState != etcdv1.InitialClusterStateNew {
		return etcdv1.MemberRestore{}, false
	}
	if r := m.Spec.Bootstrap.Restore; r != nil {
		return *r, true
	}
	if c.Spec.Bootstrap != nil && c.Spec.Bootstrap.Restore != nil {
		return etcdv1.MemberRestore{Source: c.Spec.Bootstrap.Restore.Source.Location()}, true
	}
	return etcdv1.MemberRestore{}, false
}

// RestoreSource is what a founding member restores (restoreOf): the source the cluster
// controller resolved into the member when it created it or, for a member created before
// members recorded it, the cluster's s3 or pvc source. nil when the member restores nothing,
// or when its source is unknown (a snapshotRef never resolved into it): such a member must
// not start, or it would start empty.
func RestoreSource(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) *etcdv1.MemberRestore {
	restore, ok := restoreOf(c, m)
	if !ok || (restore.Source.S3 == nil && restore.Source.PVC == nil) {
		return nil
	}
	return &restore
}

// restoreInitContainers put the snapshot into a founding member's data directory before etcd
// starts. The first copies the operator's binary (the restore agent) into a shared emptyDir;
// the second runs it in the etcd image, whose etcdutl matches the cluster's version. The agent
// does nothing when the data directory holds a member already, so a restarted Pod never
// restores again.
func restoreInitContainers(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, etcdImage, agentImage string) []corev1.Container {
	restore := RestoreSource(c, m)
	if restore == nil {
		return nil
	}
	src := restore.Source
	b := m.Spec.Bootstrap
	store, env, mounts, _ := snapshotStore(src, restoreSourceDir, true)
	req := request.Restore{
		Name: SourceName(src), URI: SourceURI(src), Checksum: restore.Checksum,
		DataDir: DataDir + "/data", StagingDir: restoreStagingDir, Etcdutl: request.DefaultEtcdutl,
		MemberName: m.Name, InitialCluster: b.InitialCluster, InitialClusterToken: b.ClusterToken,
		InitialAdvertisePeerURLs: PeerURL(c, m.Name),
		Store:                    store,
	}
	if a := restore.Archive; a != nil {
		// A restore to a target: the etcd image's own etcd replays the archive (the agent's
		// default --etcd).
		req.Archive = request.ArchiveTarget{Prefix: a.Prefix, Revision: a.Revision}
		if a.Time != nil {
			req.Archive.Time = a.Time.UTC()
		}
	}
	security := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	agentMount := corev1.VolumeMount{Name: "agent", MountPath: agentDir}
	return []corev1.Container{
		{
			Name: "install-restore-agent", Image: agentImage, Args: request.CopySelf{Dest: agentBinary}.Args(),
			VolumeMounts: []corev1.VolumeMount{agentMount}, SecurityContext: security,
		},
		{
			Name: RestoreContainerName, Image: etcdImage, Command: []string{agentBinary}, Args: req.Args(), Env: env,
			VolumeMounts: append([]corev1.VolumeMount{{Name: "data", MountPath: DataDir},
				{Name: "agent", MountPath: agentDir, ReadOnly: true}}, mounts...),
			SecurityContext:          security,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			Resources:                restoreResources(c),
		},
	}
}

// restoreResources are the restore container's: the member's etcd container's (spec.resources,
// or their defaults), as it holds the member's whole database in an etcd of its own (etcdutl's
// restore, and with a target the scratch etcd the archive is replayed on) before the member's
// etcd starts. Init containers run alone, so the Pod asks the scheduler for no more than its
// etcd container does; and identical requests and limits keep the Pod's QoS class (a
// Guaranteed etcd container stays Guaranteed, where a restore container without resources
// would make the Pod Burstable, or get a LimitRange's defaults too small for the database).
func restoreResources(c *etcdv1.EtcdCluster) corev1.ResourceRequirements {
	return resources(c)
}

// restoreServiceAccount is the ServiceAccount of a member's Pod: the one its restore source
// names for workload identity (the restore init container reads the source as it), else the
// namespace's default. It stays with the Pod, as a source PVC does: the Pod keeps its restore
// init containers.
func restoreServiceAccount(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) string {
	if restore := RestoreSource(c, m); restore != nil {
		return StoreServiceAccount(restore.Source)
	}
	return ""
}

func restoreVolumes(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) []corev1.Volume {
	restore := RestoreSource(c, m)
	if restore == nil {
		return nil
	}
	_, _, _, vols := snapshotStore(restore.Source, restoreSourceDir, true)
	return append([]corev1.Volume{{Name: "agent", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, vols...)
}

// SourceName is the S3 key or the path in the volume of the file a restore source names.
func SourceName(loc etcdv1.SnapshotLocation) string {
	if loc.S3 != nil {
		return loc.S3.Key
	}
	return loc.PVC.SubPath
}

// SourceURI names a restore source's file in messages: s3://bucket/key or pvc://claim/path.
func SourceURI(loc etcdv1.SnapshotLocation) string {
	if loc.S3 != nil {
		return "s3://" + loc.S3.Bucket + "/" + loc.S3.Key
	}
	return "pvc://" + loc.PVC.ClaimName + "/" + loc.PVC.SubPath
}

// SecretKeyS3CA is the S3 credentials Secret's optional key with the CA bundle to trust for
// an https endpoint with a private CA (the agent's request.EnvS3CA).
const SecretKeyS3CA = "ca.crt"

// snapshotStore is an agent's store, environment and volumes for a snapshot location: S3
// settings with credentials from the named Secret (none named: the agent's default chain
// finds them, snapshotstore.ChooseCredentials), or the PVC mounted at mountPath.
func snapshotStore(loc etcdv1.SnapshotLocation, mountPath string, readOnly bool) (request.Store, []corev1.EnvVar, []corev1.VolumeMount, []corev1.Volume) {
	if loc.S3 != nil {
		s3 := loc.S3
		store := request.Store{S3Endpoint: s3.Endpoint, S3Bucket: s3.Bucket, S3Region: s3.Region, S3PathStyle: s3.ForcePathStyle}
		if s3.CredentialsSecretRef.Name == "" {
			return store, nil, nil, nil
		}
		// Optional for a restore (readOnly): the seed's Pod keeps its restore init containers,
		// and must still start once the restore is done and the Secret is gone; the agent then
		// does nothing, and while it must restore a missing key is reported as rejected
		// credentials.
		env := []corev1.EnvVar{
			SecretEnv(request.EnvAWSAccessKeyID, s3.CredentialsSecretRef.Name, request.EnvAWSAccessKeyID, readOnly),
			SecretEnv(request.EnvAWSSecretAccessKey, s3.CredentialsSecretRef.Name, request.EnvAWSSecretAccessKey, readOnly),
			SecretEnv(request.EnvS3CA, s3.CredentialsSecretRef.Name, SecretKeyS3CA, true),
		}
		return store, env, nil, nil
	}
	mounts := []corev1.VolumeMount{{Name: "snapshots", MountPath: mountPath, ReadOnly: readOnly}}
	vols := []corev1.Volume{{Name: "snapshots", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: loc.PVC.ClaimName, ReadOnly: readOnly},
	}}}
	return request.Store{Dir: mountPath}, nil, mounts, vols
}

// SecretEnv is an environment variable from a Secret's key.
func SecretEnv(name, secret, key string, optional bool) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key, Optional: ptr(optional),
	}}}
}
