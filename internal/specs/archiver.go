package specs

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent/request"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// ActionArchive names a schedule's archiver (its Deployment and its access).
const ActionArchive = "archive"

// ArchiverName is the name of a schedule's archiver Deployment, ServiceAccount, Role and
// RoleBinding.
func ArchiverName(schedule string) string { return SnapshotJobName(schedule, ActionArchive) }

// ArchivePrefix is where the schedule's archive is stored in its destination.
func ArchivePrefix(sc *etcdv1.EtcdSnapshotSchedule) string {
	return snapshotstore.ArchivePrefix(sc.Spec.Destination, sc.Namespace, sc.Spec.ClusterRef.Name, sc.Name)
}

// DefaultArchiverResources are the archiver's when spec.archive sets none: it holds one open
// segment (8Mi by default) and its encoding, and waits on the watch most of the time.
func DefaultArchiverResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
}

// archiverLabels select a schedule's archiver; the snapshot agent's labels of the cluster
// make its NetworkPolicy admit it.
func archiverLabels(sc *etcdv1.EtcdSnapshotSchedule) map[string]string {
	out := SnapshotAgentLabels(sc.Spec.ClusterRef.Name)
	out[etcdv1.LabelArchiverOf] = sc.Name
	return out
}

// ArchiverRequest is the archiver's command line for the schedule's archive of cluster c.
func ArchiverRequest(sc *etcdv1.EtcdSnapshotSchedule, c *etcdv1.EtcdCluster, store request.Store) request.Archive {
	a := sc.Spec.Archive
	req := request.Archive{
		Prefix: ArchivePrefix(sc), Owner: snapshotstore.OwnerOf(sc.Namespace, sc.Name, string(sc.UID)),
		SegmentInterval: etcdv1.DefaultArchiveSegmentInterval, SegmentMaxBytes: etcdv1.DefaultArchiveSegmentMaxBytes,
		ReportStatus: true, Store: store,
	}
	if a.SegmentInterval != nil {
		req.SegmentInterval = a.SegmentInterval.Duration
	}
	if a.SegmentMaxBytes != nil {
		req.SegmentMaxBytes = a.SegmentMaxBytes.Value()
	}
	req.Endpoints, req.CAFile, req.CertFile, req.KeyFile = etcdClientOf(c)
	return req
}

// ArchiverDeployment runs the archiver of a schedule with spec.archive (`etcd-operator
// archive`), one replica, replaced with Recreate so that two never write one archive; as the
// snapshot Jobs, non-root with a read-only root filesystem, the cluster's TLS and root
// password, the destination's credentials, and a short-lived API token of its own
// ServiceAccount (ArchiverAccess) to report into the schedule's status. The caller makes the
// schedule its owner.
func ArchiverDeployment(sc *etcdv1.EtcdSnapshotSchedule, c *etcdv1.EtcdCluster, image string) *appsv1.Deployment {
	store, env, mounts, vols := snapshotStore(sc.Spec.Destination, snapshotDir, false)
	req := ArchiverRequest(sc, c, store)
	env = append(passwordEnv(c), env...)
	m, v := tlsVolumes(c)
	mounts, vols = append(m, mounts...), append(v, vols...)
	apiMount, apiVol := apiAccess()
	mounts, vols = append(mounts, apiMount), append(vols, apiVol)
	resources := DefaultArchiverResources()
	if sc.Spec.Archive.Resources != nil {
		resources = orDefault(*sc.Spec.Archive.Resources, resources)
	}
	labels := archiverLabels(sc)
	meta := WithAdditionalMetadata(c, metav1.ObjectMeta{Name: ArchiverName(sc.Name), Namespace: sc.Namespace, Labels: maps.Clone(labels)})
	container := corev1.Container{
		Name: "archiver", Image: image, Args: req.Args(), Env: env, VolumeMounts: mounts, Resources: resources,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	serviceAccount := StoreServiceAccount(sc.Spec.Destination)
	if serviceAccount == "" {
		serviceAccount = ArchiverName(sc.Name)
	}
	return &appsv1.Deployment{
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(labels)},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				// The selector's labels and the cluster's spec.additionalMetadata, as the Deployment's.
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(meta.Labels), Annotations: orNil(withMetadata(caRotationStage(c), extraAnnotations(c)))},
				Spec: corev1.PodSpec{
					ServiceAccountName:           serviceAccount,
					AutomountServiceAccountToken: ptr(false),
					EnableServiceLinks:           ptr(false),
					SecurityContext:              agentPodSecurityContext(),
					Containers:                   []corev1.Container{container},
					Volumes:                      vols,
					ImagePullSecrets:             clusterPullSecrets(c),
				},
			},
		},
	}
}

// caRotationStage is AnnotationCARotationStage for the archiver of cluster c: nil before any
// CA rotation, so that an archiver of a cluster that never rotated is not started again.
func caRotationStage(c *etcdv1.EtcdCluster) map[string]string {
	r := c.Status.CARotation
	if r == nil {
		return nil
	}
	return map[string]string{etcdv1.AnnotationCARotationStage: r.Stage + "/" + r.BundleHash + "/" + r.SecretsHash}
}

// ArchiverAccess is what lets the archiver report, and nothing else: a Role allowing get of
// the schedule and patch of its status, bound to the archiver's ServiceAccount, and that
// ServiceAccount when the operator makes it (nil when the destination names one). The caller
// makes the schedule their owner.
func ArchiverAccess(sc *etcdv1.EtcdSnapshotSchedule, c *etcdv1.EtcdCluster) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	meta := WithAdditionalMetadata(c, metav1.ObjectMeta{Name: ArchiverName(sc.Name), Namespace: sc.Namespace, Labels: map[string]string{
		etcdv1.LabelArchiverOf: sc.Name, etcdv1.LabelManagedBy: ManagerName,
	}})
	var sa *corev1.ServiceAccount
	serviceAccount := StoreServiceAccount(sc.Spec.Destination)
	if serviceAccount == "" {
		serviceAccount = meta.Name
		sa = &corev1.ServiceAccount{ObjectMeta: *meta.DeepCopy(), AutomountServiceAccountToken: ptr(false)}
	}
	group := etcdv1.GroupVersion.Group
	role := &rbacv1.Role{ObjectMeta: *meta.DeepCopy(), Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{group}, Resources: []string{"etcdsnapshotschedules"}, ResourceNames: []string{sc.Name}, Verbs: []string{"get"}},
		{APIGroups: []string{group}, Resources: []string{"etcdsnapshotschedules/status"}, ResourceNames: []string{sc.Name}, Verbs: []string{"patch"}},
	}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: *meta.DeepCopy(),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: serviceAccount, Namespace: sc.Namespace}},
	}
	return sa, role, binding
}
