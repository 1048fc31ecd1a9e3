package specs

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestOnlyFoundingMembersOfARestoredClusterRestore(t *testing.T) {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{Version: "3.6.16",
		Bootstrap: &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: etcdv1.RestoreSource{
			PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "snaps/a.db"}}}}}}
	seed := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "r-1", Namespace: "ns"}, Spec: etcdv1.EtcdMemberSpec{
		Version: "3.6.16", Bootstrap: etcdv1.MemberBootstrap{InitialClusterState: etcdv1.InitialClusterStateNew, InitialCluster: "r-1=http://x:2380", ClusterToken: "t"}}}
	pod := Pod(c, seed, PodOptions{AgentImage: "op:1"})
	if len(pod.Spec.InitContainers) != 2 {
		t.Fatalf("the seed has %d init containers, want the agent copy and the restore", len(pod.Spec.InitContainers))
	}
	restore := pod.Spec.InitContainers[1]
	args := strings.Join(restore.Args, " ")
	for _, want := range []string{"restore-agent", "--member-name=r-1", "--initial-cluster=r-1=http://x:2380", "--initial-cluster-token=t", "--dir=/snapshot-source", "--name=snaps/a.db", "--data-dir=/var/lib/etcd/data"} {
		if !strings.Contains(args, want) {
			t.Errorf("restore args %q lack %q", args, want)
		}
	}
	if restore.Image != "quay.io/coreos/etcd:v3.6.16" || pod.Spec.InitContainers[0].Image != "op:1" {
		t.Errorf("images: %s, %s", pod.Spec.InitContainers[0].Image, restore.Image)
	}
	joiner := seed.DeepCopy()
	joiner.Spec.Bootstrap.InitialClusterState = etcdv1.InitialClusterStateExisting
	if p := Pod(c, joiner, PodOptions{AgentImage: "op:1"}); len(p.Spec.InitContainers) != 0 {
		t.Error("a member that joins later must not restore")
	}
}

// A seed created from a snapshotRef restores the file and checksum resolved into it, not
// anything read from the cluster's spec again; a seed whose snapshotRef was never resolved
// has no source, and must not get a Pod that would start empty.
func TestASeedRestoresTheSourceResolvedIntoIt(t *testing.T) {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{Version: "3.6.16",
		Bootstrap: &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: etcdv1.RestoreSource{
			SnapshotRef: &corev1.LocalObjectReference{Name: "nightly"}}}}}}
	seed := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "r-1", Namespace: "ns"}, Spec: etcdv1.EtcdMemberSpec{
		Version: "3.6.16", Bootstrap: etcdv1.MemberBootstrap{InitialClusterState: etcdv1.InitialClusterStateNew, InitialCluster: "r-1=http://x:2380", ClusterToken: "t"}}}
	if RestoreSource(c, seed) != nil {
		t.Fatal("an unresolved snapshotRef must give no source")
	}
	seed.Spec.Bootstrap.Restore = &etcdv1.MemberRestore{Snapshot: "nightly", Checksum: "sha256:abc",
		Source: etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Endpoint: "http://minio:9000", Bucket: "b", Key: "p/nightly.db",
			CredentialsSecretRef: corev1.LocalObjectReference{Name: "creds"}}}}
	pod := Pod(c, seed, PodOptions{AgentImage: "op:1"})
	if len(pod.Spec.InitContainers) != 2 {
		t.Fatalf("the seed has %d init containers, want the agent copy and the restore", len(pod.Spec.InitContainers))
	}
	restore := pod.Spec.InitContainers[1]
	args := strings.Join(restore.Args, " ")
	for _, want := range []string{"--uri=s3://b/p/nightly.db", "--name=p/nightly.db", "--checksum=sha256:abc", "--s3-bucket=b"} {
		if !strings.Contains(args, want) {
			t.Errorf("restore args %q lack %q", args, want)
		}
	}
	if len(restore.Env) == 0 || restore.Env[0].ValueFrom.SecretKeyRef.Name != "creds" {
		t.Errorf("the restore reads credentials from %+v, want the snapshot's Secret creds", restore.Env)
	}
}

func toTarget(schedule string) *etcdv1.BootstrapSpec {
	return &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: etcdv1.RestoreSource{ScheduleRef: &corev1.LocalObjectReference{Name: schedule}},
		Target: &etcdv1.RestoreTarget{Time: &metav1.Time{Time: time.Date(2026, 12, 2, 10, 15, 0, 0, time.UTC)}}}}
}

func TestSnapshotNeededBy(t *testing.T) {
	ref := &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: etcdv1.RestoreSource{SnapshotRef: &corev1.LocalObjectReference{Name: "snap"}}}}
	cluster := func(edit func(*etcdv1.EtcdCluster)) etcdv1.EtcdCluster {
		c := etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}, Status: etcdv1.EtcdClusterStatus{ClusterID: "c1"}}
		edit(&c)
		return c
	}
	for _, tc := range []struct {
		name    string
		cluster etcdv1.EtcdCluster
		want    string // part of the one use; "" when none
	}{
		{"a cluster that names no snapshot", cluster(func(*etcdv1.EtcdCluster) {}), ""},
		{"a recovery from it asked for", cluster(func(c *etcdv1.EtcdCluster) {
			c.Annotations = map[string]string{etcdv1.AnnotationRecoverFromSnapshot: "snap"}
		}), "asks to be rebuilt from it"},
		{"a recovery from another asked for", cluster(func(c *etcdv1.EtcdCluster) {
			c.Annotations = map[string]string{etcdv1.AnnotationRecoverFromSnapshot: "other"}
		}), ""},
		{"a recovery from it begun", cluster(func(c *etcdv1.EtcdCluster) {
			c.Status.SnapshotRecovery = &etcdv1.SnapshotRecoveryStatus{Snapshot: "snap"}
		}), "is being rebuilt from it"},
		{"a recovery from another begun", cluster(func(c *etcdv1.EtcdCluster) {
			c.Status.SnapshotRecovery = &etcdv1.SnapshotRecoveryStatus{Snapshot: "other"}
		}), ""},
		{"a bootstrap from it not formed yet", cluster(func(c *etcdv1.EtcdCluster) { c.Spec.Bootstrap, c.Status.ClusterID = ref, "" }), "bootstraps from it"},
		{"a bootstrap from it formed", cluster(func(c *etcdv1.EtcdCluster) { c.Spec.Bootstrap = ref }), ""},
		{"a restore to a target from its schedule not formed yet", cluster(func(c *etcdv1.EtcdCluster) { c.Spec.Bootstrap, c.Status.ClusterID = toTarget("nightly"), "" }), "restores to a target from its schedule"},
		{"a restore to a target from another schedule", cluster(func(c *etcdv1.EtcdCluster) { c.Spec.Bootstrap, c.Status.ClusterID = toTarget("hourly"), "" }), ""},
		{"a restore to a target formed", cluster(func(c *etcdv1.EtcdCluster) { c.Spec.Bootstrap = toTarget("nightly") }), ""},
		{"a cluster being deleted", cluster(func(c *etcdv1.EtcdCluster) {
			c.Status.SnapshotRecovery = &etcdv1.SnapshotRecoveryStatus{Snapshot: "snap"}
			now := metav1.Now()
			c.DeletionTimestamp = &now
		}), ""},
	} {
		users := SnapshotNeededBy("snap", "nightly", []etcdv1.EtcdCluster{tc.cluster})
		switch {
		case tc.want == "" && len(users) != 0:
			t.Errorf("%s: needed by %v, want none", tc.name, users)
		case tc.want != "" && (len(users) != 1 || !strings.Contains(users[0], tc.want) || !strings.Contains(users[0], "EtcdCluster db")):
			t.Errorf("%s: needed by %v, want EtcdCluster db, %q", tc.name, users, tc.want)
		}
	}
}

// A seed restoring to a target replays the archive resolved into it: the restore agent gets
// the archive's prefix and the target, a time in UTC to the nanosecond; one without a target
// gets neither flag.
func TestASeedRestoringToATargetReplaysTheArchive(t *testing.T) {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{Version: "3.6.16"}}
	seed := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "r-1", Namespace: "ns"}, Spec: etcdv1.EtcdMemberSpec{
		Version: "3.6.16", Bootstrap: etcdv1.MemberBootstrap{InitialClusterState: etcdv1.InitialClusterStateNew, InitialCluster: "r-1=http://x:2380", ClusterToken: "t"}}}
	source := etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "snaps/nightly-1.db"}}
	at := time.Date(2026, 12, 2, 10, 15, 0, 5, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		name    string
		archive *etcdv1.MemberRestoreArchive
		want    []string
	}{
		{"a time", &etcdv1.MemberRestoreArchive{Prefix: "snaps/nightly.archive", Time: &metav1.Time{Time: at}}, []string{"--archive-prefix=snaps/nightly.archive", "--to-time=2026-12-02T09:15:00.000000005Z"}},
		{"a revision", &etcdv1.MemberRestoreArchive{Prefix: "snaps/nightly.archive", Revision: 42}, []string{"--archive-prefix=snaps/nightly.archive", "--to-revision=42"}},
		{"no target", nil, nil},
	} {
		seed.Spec.Bootstrap.Restore = &etcdv1.MemberRestore{Source: source, Checksum: "sha256:abc", Snapshot: "nightly-1", Archive: tc.archive}
		args := Pod(c, seed, PodOptions{AgentImage: "op:1"}).Spec.InitContainers[1].Args
		joined := strings.Join(args, " ")
		for _, want := range tc.want {
			if !strings.Contains(joined, want) {
				t.Errorf("%s: restore args %q lack %q", tc.name, joined, want)
			}
		}
		if tc.archive == nil && strings.Contains(joined, "archive") {
			t.Errorf("%s: restore args %q name an archive", tc.name, joined)
		}
	}
}

// The restore container, which runs etcdutl's restore and, with a target, the scratch etcd
// the archive is replayed on, has the member's etcd resources: the defaults, or spec.resources
// as a whole, limits too, so that the Pod's QoS class is the etcd container's.
func TestTheRestoreContainerHasTheMembersResources(t *testing.T) {
	guaranteed := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
	}
	limitOnly := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}}
	target := &etcdv1.MemberRestoreArchive{Prefix: "snaps/nightly.archive", Revision: 42}
	for _, tc := range []struct {
		name      string
		resources corev1.ResourceRequirements
		archive   *etcdv1.MemberRestoreArchive
		want      corev1.ResourceRequirements
	}{
		{"the defaults, to a target", corev1.ResourceRequirements{}, target, DefaultResources()},
		{"the defaults, no target", corev1.ResourceRequirements{}, nil, DefaultResources()},
		{"guaranteed, to a target", guaranteed, target, guaranteed},
		{"guaranteed, no target", guaranteed, nil, guaranteed},
		{"a memory limit alone", limitOnly, target, limitOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{Version: "3.6.16", Resources: tc.resources}}
			seed := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "r-1", Namespace: "ns"}, Spec: etcdv1.EtcdMemberSpec{
				Version: "3.6.16", Bootstrap: etcdv1.MemberBootstrap{InitialClusterState: etcdv1.InitialClusterStateNew, InitialCluster: "r-1=http://x:2380", ClusterToken: "t",
					Restore: &etcdv1.MemberRestore{Source: etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "snaps/nightly-1.db"}},
						Checksum: "sha256:abc", Snapshot: "nightly-1", Archive: tc.archive}}}}
			pod := Pod(c, seed, PodOptions{AgentImage: "op:1"})
			var restore, etcd *corev1.Container
			for i := range pod.Spec.InitContainers {
				if pod.Spec.InitContainers[i].Name == RestoreContainerName {
					restore = &pod.Spec.InitContainers[i]
				}
			}
			for i := range pod.Spec.Containers {
				if pod.Spec.Containers[i].Name == "etcd" {
					etcd = &pod.Spec.Containers[i]
				}
			}
			if restore == nil || etcd == nil {
				t.Fatalf("no restore container or no etcd container in %+v", pod.Spec)
			}
			if !equality.Semantic.DeepEqual(restore.Resources, tc.want) || !equality.Semantic.DeepEqual(restore.Resources, etcd.Resources) {
				t.Errorf("the restore container has %+v, the etcd container %+v; want both %+v", restore.Resources, etcd.Resources, tc.want)
			}
		})
	}
}
