package specs

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent/request"
)

func archiveSchedule(dest etcdv1.SnapshotLocation, a etcdv1.SnapshotArchive) *etcdv1.EtcdSnapshotSchedule {
	return &etcdv1.EtcdSnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns", UID: "u1"},
		Spec: etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: corev1.LocalObjectReference{Name: "main"}, Schedule: "0 3 * * *", Destination: dest, Archive: &a}}
}

// The archiver's Deployment, for each kind of destination and cluster: one replica replaced
// with Recreate (never two writers of one archive), locked down like the agent Jobs, its
// command line exactly the request (the archive next to the snapshots, the schedule as owner,
// spec.archive's segment bounds or the defaults), secrets from Secrets only, its own
// ServiceAccount unless the destination names one, and the cluster's NetworkPolicy labels.
func TestArchiverDeployment(t *testing.T) {
	s3 := etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Endpoint: "https://s3.example", Bucket: "b", Key: "etcd/",
		CredentialsSecretRef: corev1.LocalObjectReference{Name: "creds"}}}
	s3Identity := etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Endpoint: "https://s3.example", Bucket: "b", ServiceAccountName: "irsa"}}
	pvc := etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "etcd"}}
	plain := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}}
	secured := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{
		TLS:  &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{}},
		Auth: &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "root"}}}}
	small := resource.MustParse("1Mi")
	own := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	for _, tc := range []struct {
		name      string
		sc        *etcdv1.EtcdSnapshotSchedule
		c         *etcdv1.EtcdCluster
		want      request.Archive
		envs      map[string]string // env name -> Secret
		sa        string
		resources corev1.ResourceRequirements
	}{{
		name: "S3 with credentials, defaults", sc: archiveSchedule(s3, etcdv1.SnapshotArchive{}), c: plain,
		want: request.Archive{Prefix: "etcd/ns/main/nightly.archive", Owner: "ns/nightly/u1", Endpoints: []string{"http://main-client.ns.svc:2379"},
			SegmentInterval: 5 * time.Second, SegmentMaxBytes: 8 << 20, ReportStatus: true,
			Store: request.Store{S3Endpoint: "https://s3.example", S3Bucket: "b"}},
		envs: map[string]string{"AWS_ACCESS_KEY_ID": "creds", "AWS_SECRET_ACCESS_KEY": "creds", "S3_CA_PEM": "creds"},
		sa:   "nightly-archive-" + shortHash("nightly"), resources: DefaultArchiverResources(),
	}, {
		name: "S3 with a workload identity, TLS and auth, own bounds and resources",
		sc:   archiveSchedule(s3Identity, etcdv1.SnapshotArchive{SegmentInterval: &metav1.Duration{Duration: time.Minute}, SegmentMaxBytes: &small, Resources: &own}),
		c:    secured,
		want: request.Archive{Prefix: "ns/main/nightly.archive", Owner: "ns/nightly/u1", Endpoints: []string{"https://main-client.ns.svc:2379"},
			CAFile: tlsCADir + "/ca.crt", SegmentInterval: time.Minute, SegmentMaxBytes: 1 << 20, ReportStatus: true,
			Store: request.Store{S3Endpoint: "https://s3.example", S3Bucket: "b"}},
		envs: map[string]string{"ETCD_ROOT_PASSWORD": "root", "ETCD_ROOT_PASSWORD_APPLIED": "main-root-applied"},
		sa:   "irsa", resources: own,
	}, {
		name: "a PVC", sc: archiveSchedule(pvc, etcdv1.SnapshotArchive{}), c: plain,
		want: request.Archive{Prefix: "etcd/nightly.archive", Owner: "ns/nightly/u1", Endpoints: []string{"http://main-client.ns.svc:2379"},
			SegmentInterval: 5 * time.Second, SegmentMaxBytes: 8 << 20, ReportStatus: true, Store: request.Store{Dir: snapshotDir}},
		envs: map[string]string{}, sa: "nightly-archive-" + shortHash("nightly"), resources: DefaultArchiverResources(),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d := ArchiverDeployment(tc.sc, tc.c, "op:1")
			checkArchiverPod(t, d, tc.want, tc.envs, tc.sa, tc.resources)
			checkArchiverMounts(t, d, tc.c == secured, tc.sc.Spec.Destination.PVC != nil)
			checkArchiverAccess(t, tc.sc, tc.c, tc.sa)
		})
	}
}

// checkArchiverPod: one replica, Recreate, locked down, the request, secrets from Secrets
// only, the ServiceAccount and resources.
func checkArchiverPod(t *testing.T, d *appsv1.Deployment, want request.Archive, wantEnvs map[string]string, sa string, resources corev1.ResourceRequirements) {
	t.Helper()
	pod := d.Spec.Template.Spec
	ctr := pod.Containers[0]
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %d, strategy %s", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	if *pod.AutomountServiceAccountToken || !*pod.SecurityContext.RunAsNonRoot || !*ctr.SecurityContext.ReadOnlyRootFilesystem || *ctr.SecurityContext.AllowPrivilegeEscalation {
		t.Error("the archiver must be non-root, read-only, without an automounted token")
	}
	if ctr.Args[0] != request.CommandArchive {
		t.Fatalf("args %q", ctr.Args)
	}
	if got, err := request.ParseArchive(ctr.Args[1:]); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("request %+v (%v)\nwant    %+v", got, err, want)
	}
	if envs := secretEnvs(t, ctr); !reflect.DeepEqual(envs, wantEnvs) {
		t.Errorf("env from Secrets %v, want %v", envs, wantEnvs)
	}
	if pod.ServiceAccountName != sa || !reflect.DeepEqual(ctr.Resources, resources) {
		t.Errorf("ServiceAccount %q, resources %v", pod.ServiceAccountName, ctr.Resources)
	}
}

// checkArchiverMounts: the API token always, the cluster's CA with TLS, the volume for a PVC;
// the labels the cluster's NetworkPolicy admits, the selector's.
func checkArchiverMounts(t *testing.T, d *appsv1.Deployment, tls, pvc bool) {
	t.Helper()
	mounts := map[string]bool{}
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounts[m.MountPath] = true
	}
	if !mounts[serviceAccountTokenDir] || tls != mounts[tlsCADir] || pvc != mounts[snapshotDir] {
		t.Errorf("mounts %v", mounts)
	}
	if l := d.Spec.Template.Labels; l[etcdv1.LabelSnapshotOf] != "main" || l[etcdv1.LabelArchiverOf] != "nightly" || !reflect.DeepEqual(d.Spec.Selector.MatchLabels, l) {
		t.Errorf("labels %v, selector %v", l, d.Spec.Selector.MatchLabels)
	}
}

// checkArchiverAccess: a ServiceAccount unless the destination names one, bound to a Role
// that grants get of the schedule and patch of its status, nothing else.
func checkArchiverAccess(t *testing.T, sc *etcdv1.EtcdSnapshotSchedule, c *etcdv1.EtcdCluster, sa string) {
	t.Helper()
	made, role, binding := ArchiverAccess(sc, c)
	if (made != nil) != (sa != "irsa") || binding.Subjects[0].Name != sa || binding.RoleRef.Name != role.Name {
		t.Errorf("access: sa %v, binding %+v", made, binding)
	}
	for _, r := range role.Rules {
		if !reflect.DeepEqual(r.ResourceNames, []string{"nightly"}) || len(r.Verbs) != 1 {
			t.Errorf("role rule %+v grants more than the schedule's get and status patch", r)
		}
	}
}

// secretEnvs is the container's environment by name and Secret; a variable not from a
// Secret fails t.
func secretEnvs(t *testing.T, ctr corev1.Container) map[string]string {
	t.Helper()
	envs := map[string]string{}
	for _, e := range ctr.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("env %s is not from a Secret", e.Name)
			continue
		}
		envs[e.Name] = e.ValueFrom.SecretKeyRef.Name
	}
	return envs
}

// During a CA rotation the archiver trusts the server CAs of the rotation's bundle (the old
// and the new while members move), as the operator's client does, and its Pod is started
// again at each stage (AnnotationCARotationStage), reading its Secrets as they are then;
// before any rotation it trusts the server Secret's CA and carries no stage.
func TestArchiverFollowsACARotation(t *testing.T) {
	sc := archiveSchedule(etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups"}}, etcdv1.SnapshotArchive{})
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{
		TLS: &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{}}}}
	serverCA := func(d *appsv1.Deployment) (string, corev1.KeyToPath) {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == "server-ca" {
				return v.Secret.SecretName, v.Secret.Items[0]
			}
		}
		t.Fatal("no server-ca volume")
		return "", corev1.KeyToPath{}
	}
	stages := map[string]string{}
	for _, tc := range []struct {
		rotation *etcdv1.CARotationStatus
		secret   string
		key      string
	}{
		{nil, "main-server-tls", SecretKeyCA},
		{&etcdv1.CARotationStatus{Stage: etcdv1.ReasonTrustingBoth}, "main-server-tls", SecretKeyCA}, // no bundle written yet
		{&etcdv1.CARotationStatus{Stage: etcdv1.ReasonTrustingBoth, BundleHash: "h1"}, "main-ca-bundle", CABundleKeyServer},
		{&etcdv1.CARotationStatus{Stage: etcdv1.ReasonReissuingOnNewCA, BundleHash: "h1"}, "main-ca-bundle", CABundleKeyServer},
		{&etcdv1.CARotationStatus{Stage: etcdv1.ReasonDroppingOldCA, BundleHash: "h2"}, "main-ca-bundle", CABundleKeyServer},
		{&etcdv1.CARotationStatus{Stage: etcdv1.ReasonCARotated, BundleHash: "h2"}, "main-server-tls", SecretKeyCA},
	} {
		c.Status.CARotation = tc.rotation
		d := ArchiverDeployment(sc, c, "op:1")
		secret, item := serverCA(d)
		if secret != tc.secret || item.Key != tc.key || item.Path != SecretKeyCA {
			t.Errorf("rotation %+v: server CA from %s %+v; want %s key %s as ca.crt", tc.rotation, secret, item, tc.secret, tc.key)
		}
		stage, ok := d.Spec.Template.Annotations[etcdv1.AnnotationCARotationStage]
		if ok != (tc.rotation != nil) {
			t.Errorf("rotation %+v: stage annotation %q (%t)", tc.rotation, stage, ok)
		}
		if before, seen := stages[stage]; ok && seen {
			t.Errorf("rotation %+v: the same stage annotation %q as %s: the archiver would not start again", tc.rotation, stage, before)
		}
		stages[stage] = fmt.Sprint(tc.rotation)
	}
}
