package specs

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestOnlyFoundingMembersOfARestoredClusterRestore(t *testing.T) {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{Version: "3.6.16",
		Bootstrap: &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: etcdv1.SnapshotLocation{
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
