package api

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// runPlugin runs `kubectl etcd` in-process against the test bed's apiserver.
func runPlugin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := plugin.NewRootCommand(&out, &errOut)
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...))
	cmd.SetContext(t.Context())
	err := cmd.Execute()
	return out.String() + errOut.String(), err
}

// pluginCluster is the EtcdCluster the plugin's API tests act on.
const pluginCluster = "plug"

// replicasAndAnnotation reads the test cluster's spec.replicas and paused-replicas annotation.
func replicasAndAnnotation(t *testing.T) (int32, string, bool) {
	t.Helper()
	c := &etcdv1.EtcdCluster{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: pluginCluster}, c); err != nil {
		t.Fatal(err)
	}
	v, ok := c.Annotations[etcdv1.AnnotationPausedReplicas]
	return *c.Spec.Replicas, v, ok
}

// wantReplicas runs the plugin and checks spec.replicas after it.
func wantReplicas(t *testing.T, want int32, args ...string) {
	t.Helper()
	if out, err := runPlugin(t, args...); err != nil {
		t.Fatalf("%v: %v %s", args, err, out)
	}
	if n, _, _ := replicasAndAnnotation(t); n != want {
		t.Fatalf("after %v: replicas %d, want %d", args, n, want)
	}
}

// wantRefusal runs the plugin and checks that it fails with a message containing want.
func wantRefusal(t *testing.T, want string, args ...string) {
	t.Helper()
	if _, err := runPlugin(t, args...); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v: %v; want a refusal naming %q", args, err, want)
	}
}

func setReadyMembers(t *testing.T, n int32) {
	t.Helper()
	c := &etcdv1.EtcdCluster{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: pluginCluster}, c); err != nil {
		t.Fatal(err)
	}
	c.Status.ReadyMembers = n
	if err := k8s.Status().Update(t.Context(), c); err != nil {
		t.Fatal(err)
	}
}

// The plugin's commands that act through spec.replicas and annotations, against the real
// apiserver: pause remembers the size and resume restores it; add/remove-member change it by
// one and refuse when the quorum would go (unless --force); replace-member annotates the
// member; completion lists clusters and members.
func TestPluginChangesGoThroughTheAPI(t *testing.T) {
	requireCreate(t, newCluster(pluginCluster, withReplicas(3)))
	setReadyMembers(t, 3)
	t.Run("pause and resume", pluginPauseResume)
	t.Run("add and remove members", pluginAddRemove)
	t.Run("replace a member", pluginReplace)
	t.Run("completion", pluginCompletion)
}

func pluginPauseResume(t *testing.T) {
	if out, err := runPlugin(t, "pause", pluginCluster); err != nil || !strings.Contains(out, "paused plug (3 members") {
		t.Fatalf("pause: %v %s", err, out)
	}
	if n, v, _ := replicasAndAnnotation(t); n != 0 || v != "3" {
		t.Fatalf("after pause: replicas %d, annotation %q", n, v)
	}
	wantRefusal(t, "already paused", "pause", pluginCluster)
	if out, err := runPlugin(t, "resume", pluginCluster); err != nil || !strings.Contains(out, "resumed plug with 3 members") {
		t.Fatalf("resume: %v %s", err, out)
	}
	if n, _, ok := replicasAndAnnotation(t); n != 3 || ok {
		t.Fatalf("after resume: replicas %d, annotation left %t", n, ok)
	}
}

func pluginAddRemove(t *testing.T) {
	wantReplicas(t, 4, "add-member", pluginCluster)
	// 4 members, 3 ready: removing one could leave 2 of 3, which is still a quorum.
	wantReplicas(t, 3, "remove-member", pluginCluster)
	setReadyMembers(t, 2)
	wantRefusal(t, "below the quorum", "remove-member", pluginCluster)
	if n, _, _ := replicasAndAnnotation(t); n != 3 {
		t.Fatalf("a refused remove-member changed replicas to %d", n)
	}
	if out, err := runPlugin(t, "remove-member", pluginCluster, "--force"); err != nil || !strings.Contains(out, "WARNING") {
		t.Fatalf("remove-member --force: %v %s", err, out)
	}
	if n, _, _ := replicasAndAnnotation(t); n != 2 {
		t.Fatalf("after remove-member --force: replicas %d", n)
	}
}

func pluginReplace(t *testing.T) {
	m := newMember("plug-1", func(m *etcdv1.EtcdMember) {
		m.Spec.ClusterName = pluginCluster
		m.Labels = specs.MemberLabels(pluginCluster, "plug-1")
	})
	requireCreate(t, m)
	// No member Pod is ready: replacing it leaves no quorum, so only --force does it.
	wantRefusal(t, "below the quorum", "replace-member", pluginCluster, "plug-1")
	if _, err := runPlugin(t, "replace-member", pluginCluster, "plug-1", "--force"); err != nil {
		t.Fatal(err)
	}
	got := &etcdv1.EtcdMember{}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(m), got); err != nil || got.Annotations[etcdv1.AnnotationReplace] != "true" {
		t.Fatalf("replace annotation: %v %v", err, got.Annotations)
	}
}

func pluginCompletion(t *testing.T) {
	if out, err := runPlugin(t, "__complete", "status", ""); err != nil || !strings.Contains(out, "plug\n") {
		t.Fatalf("completion of clusters: %v %q", err, out)
	}
	if out, err := runPlugin(t, "__complete", "move-leader", pluginCluster, ""); err != nil || !strings.Contains(out, "plug-1\n") {
		t.Fatalf("completion of members: %v %q", err, out)
	}
}
