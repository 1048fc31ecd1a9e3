package specs

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestAgentResources(t *testing.T) {
	limitOnly := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}}
	requests := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	for _, tc := range []struct {
		name string
		spec *corev1.ResourceRequirements
		want corev1.ResourceRequirements
	}{
		{"none: the defaults", nil, DefaultAgentResources()},
		{"empty: the defaults", &corev1.ResourceRequirements{}, DefaultAgentResources()},
		// A default request of 64Mi beside a 32Mi limit would make the Pod invalid.
		{"a limit alone is taken as it is", &limitOnly, limitOnly},
		{"requests alone are taken as they are", &requests, requests},
	} {
		if got := AgentResources(tc.spec); !equality.Semantic.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	def := DefaultAgentResources()
	if def.Requests.Cpu().String() != "50m" || def.Requests.Memory().String() != "64Mi" || def.Limits.Memory().String() != "256Mi" || def.Limits.Cpu().Sign() != 0 {
		t.Errorf("defaults %v: want requests 50m/64Mi, a 256Mi memory limit and no CPU limit", def)
	}
}

func TestScratchSizeLimitHoldsTheLargestDatabase(t *testing.T) {
	const mi = 1 << 20
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	for _, tc := range []struct {
		name    string
		storage *resource.Quantity
		quota   *resource.Quantity
		want    int64 // the quota the limit is made of
	}{
		{"default 1Gi volume: half of it", q("1Gi"), nil, 512 * mi},
		{"no size: 1Gi's half", nil, nil, 512 * mi},
		{"a large volume: at most 8Gi", q("100Gi"), nil, 8 << 30},
		{"an explicit quota", q("1Gi"), q("4Gi"), 4 << 30},
		{"quota 0: etcd's own 2Gi", q("1Gi"), q("0"), 2 << 30},
	} {
		c := &etcdv1.EtcdCluster{Spec: etcdv1.EtcdClusterSpec{Storage: etcdv1.StorageSpec{Size: tc.storage}}}
		if tc.quota != nil {
			c.Spec.Options = &etcdv1.EtcdOptions{QuotaBackendBytes: tc.quota}
		}
		got := ScratchSizeLimit(c)
		if want := tc.want + tc.want/10 + 64*mi; got.Value() != want {
			t.Errorf("%s: %s, want %d (quota %d, a tenth and 64Mi more)", tc.name, got.String(), want, tc.want)
		}
	}
}

func s3Snapshot(serviceAccount, secret string) *etcdv1.EtcdSnapshot {
	return &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns", UID: "u1"},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "main"}, Destination: etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{
			Endpoint: "https://s3.example", Bucket: "b", ServiceAccountName: serviceAccount, CredentialsSecretRef: corev1.LocalObjectReference{Name: secret}}}}}
}

func volumeNamed(vols []corev1.Volume, name string) *corev1.Volume {
	for i := range vols {
		if vols[i].Name == name {
			return &vols[i]
		}
	}
	return nil
}

// The Job that takes the snapshot runs as its own ServiceAccount, or the one the destination
// names, with a short-lived token; with no credentials Secret it gets no AWS variables (the
// default chain); the delete and verify Jobs get the named ServiceAccount (for its cloud
// identity) and no API token.
func TestAgentJobsRunAsTheirServiceAccount(t *testing.T) {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"}}
	for _, tc := range []struct {
		name, named, secret      string
		wantSnapshot, wantOthers string
		wantKeysFromSecret       bool
	}{
		{"operator's own, static keys", "", "creds", "nightly-snapshot-" + shortHash("nightly"), "", true},
		{"workload identity, default chain", "etcd-backup", "", "etcd-backup", "etcd-backup", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := s3Snapshot(tc.named, tc.secret)
			take := SnapshotJob(s, c, "op:1", ActionSnapshot).Spec.Template.Spec
			if take.ServiceAccountName != tc.wantSnapshot {
				t.Errorf("snapshot Job as %q, want %q", take.ServiceAccountName, tc.wantSnapshot)
			}
			checkShortLivedToken(t, take)
			hasKeys := slices.ContainsFunc(take.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == "AWS_ACCESS_KEY_ID" })
			if hasKeys != tc.wantKeysFromSecret {
				t.Errorf("AWS_ACCESS_KEY_ID from a Secret: %v, want %v", hasKeys, tc.wantKeysFromSecret)
			}
			if r := take.Containers[0].Resources; !equality.Semantic.DeepEqual(r, DefaultAgentResources()) {
				t.Errorf("resources %v, want the defaults", r)
			}
			del := SnapshotJob(s, c, "op:1", ActionDelete).Spec.Template.Spec
			verify := VerifyJob(c, s, etcdv1.MemberRestore{Source: s.Spec.Destination}, "op:1").Spec.Template.Spec
			for name, pod := range map[string]corev1.PodSpec{"delete": del, "verify": verify} {
				if pod.ServiceAccountName != tc.wantOthers || volumeNamed(pod.Volumes, "api-access") != nil || *pod.AutomountServiceAccountToken {
					t.Errorf("%s Job as %q, with a token: want %q without", name, pod.ServiceAccountName, tc.wantOthers)
				}
			}
		})
	}
}

// checkShortLivedToken: the snapshot Job's only token is the projected one, where client-go
// reads it.
func checkShortLivedToken(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	api := volumeNamed(pod.Volumes, "api-access")
	mounted := slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "api-access" && m.MountPath == serviceAccountTokenDir
	})
	if api == nil || *api.Projected.Sources[0].ServiceAccountToken.ExpirationSeconds != agentTokenSeconds || !mounted {
		t.Errorf("the snapshot Job lacks its short-lived API token: %+v", api)
	}
	if *pod.AutomountServiceAccountToken {
		t.Error("the snapshot Job has the automounted token too")
	}
}

// The scratch volume is bounded by the cluster's quota; spec.resources reaches the agent.
func TestSnapshotJobScratchAndResourcesFromTheSpecs(t *testing.T) {
	quota := resource.MustParse("1Gi")
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "ns"},
		Spec: etcdv1.EtcdClusterSpec{Options: &etcdv1.EtcdOptions{QuotaBackendBytes: &quota}}}
	s := s3Snapshot("", "creds")
	s.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	pod := SnapshotJob(s, c, "op:1", ActionSnapshot).Spec.Template.Spec
	scratch := volumeNamed(pod.Volumes, "scratch")
	if want := ScratchSizeLimit(c); scratch == nil || scratch.EmptyDir.SizeLimit == nil || scratch.EmptyDir.SizeLimit.Cmp(want) != 0 {
		t.Errorf("scratch volume %+v, want an emptyDir of at most %s", scratch, want.String())
	}
	if !equality.Semantic.DeepEqual(pod.Containers[0].Resources, *s.Spec.Resources) {
		t.Errorf("resources %v, want the spec's %v", pod.Containers[0].Resources, *s.Spec.Resources)
	}
}

// The snapshot agent may patch its own EtcdSnapshot's status and nothing else; the grant goes
// to the ServiceAccount its Job runs as.
func TestSnapshotAgentAccessIsThisSnapshotsStatusOnly(t *testing.T) {
	for _, named := range []string{"", "etcd-backup"} {
		s := s3Snapshot(named, "")
		sa, role, binding := SnapshotAgentAccess(s, nil)
		if (sa == nil) != (named != "") {
			t.Errorf("named %q: operator ServiceAccount %v", named, sa)
		}
		if sa != nil && (sa.Name != SnapshotAgentServiceAccount(s) || *sa.AutomountServiceAccountToken) {
			t.Errorf("operator ServiceAccount %+v", sa)
		}
		want := []string{"etcdsnapshots/status"}
		if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, want) || !slices.Equal(role.Rules[0].ResourceNames, []string{"nightly"}) ||
			!slices.Equal(role.Rules[0].Verbs, []string{"patch"}) || !slices.Equal(role.Rules[0].APIGroups, []string{etcdv1.GroupVersion.Group}) {
			t.Errorf("role rules %+v: want patch of etcdsnapshots/status of nightly only", role.Rules)
		}
		sub := binding.Subjects
		if binding.RoleRef.Name != role.Name || len(sub) != 1 || sub[0].Name != SnapshotAgentServiceAccount(s) || sub[0].Namespace != "ns" {
			t.Errorf("binding %+v", binding)
		}
	}
}

// A founding member restoring from a source that names a ServiceAccount runs as it; others
// as the namespace's default.
func TestRestoringMemberRunsAsTheSourcesServiceAccount(t *testing.T) {
	src := etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Endpoint: "https://s3.example", Bucket: "b", Key: "k.db", ServiceAccountName: "etcd-backup"}}
	restored := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{Version: "3.6.16"}}
	seed := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "r-1", Namespace: "ns"}, Spec: etcdv1.EtcdMemberSpec{
		Version: "3.6.16", Bootstrap: etcdv1.MemberBootstrap{InitialClusterState: etcdv1.InitialClusterStateNew, InitialCluster: "r-1=http://x:2380", ClusterToken: "t",
			Restore: &etcdv1.MemberRestore{Source: src}}}}
	pod := Pod(restored, seed, PodOptions{AgentImage: "op:1"}).Spec
	if pod.ServiceAccountName != "etcd-backup" || *pod.AutomountServiceAccountToken {
		t.Errorf("seed Pod as %q (token %v), want etcd-backup without a token", pod.ServiceAccountName, *pod.AutomountServiceAccountToken)
	}
	if env := pod.InitContainers[1].Env; len(env) != 0 {
		t.Errorf("restore container env %v: no credentials Secret is named", env)
	}
	joiner := seed.DeepCopy()
	joiner.Spec.Bootstrap.InitialClusterState, joiner.Spec.Bootstrap.Restore = etcdv1.InitialClusterStateExisting, nil
	if sa := Pod(restored, joiner, PodOptions{}).Spec.ServiceAccountName; sa != "" {
		t.Errorf("a joining member runs as %q", sa)
	}
}
