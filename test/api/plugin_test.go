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

func replicasAndAnnotation(t *testing.T, name string) (int32, string, bool) {
	t.Helper()
	c := &etcdv1.EtcdCluster{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
		t.Fatal(err)
	}
	v, ok := c.Annotations[plugin.AnnotationPausedReplicas]
	return *c.Spec.Replicas, v, ok
}

// The plugin's commands that act through spec.replicas and annotations, against the real
// apiserver: pause remembers the size and resume restores it; add/remove-member change it by
// one and refuse when the quorum would go (unless --force); replace-member annotates the
// member; completion lists clusters and members.
func TestPluginChangesGoThroughTheAPI(t *testing.T) {
	c := newCluster("plug", withReplicas(3))
	requireCreate(t, c)
	c.Status.ReadyMembers = 3
	if err := k8s.Status().Update(t.Context(), c); err != nil {
		t.Fatal(err)
	}

	if out, err := runPlugin(t, "pause", "plug"); err != nil || !strings.Contains(out, "paused plug (3 members") {
		t.Fatalf("pause: %v %s", err, out)
	}
	if n, v, _ := replicasAndAnnotation(t, "plug"); n != 0 || v != "3" {
		t.Fatalf("after pause: replicas %d, annotation %q", n, v)
	}
	if _, err := runPlugin(t, "pause", "plug"); err == nil || !strings.Contains(err.Error(), "already paused") {
		t.Fatalf("second pause: %v", err)
	}
	if out, err := runPlugin(t, "resume", "plug"); err != nil || !strings.Contains(out, "resumed plug with 3 members") {
		t.Fatalf("resume: %v %s", err, out)
	}
	if n, _, ok := replicasAndAnnotation(t, "plug"); n != 3 || ok {
		t.Fatalf("after resume: replicas %d, annotation left %t", n, ok)
	}

	if _, err := runPlugin(t, "add-member", "plug"); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := replicasAndAnnotation(t, "plug"); n != 4 {
		t.Fatalf("after add-member: replicas %d", n)
	}
	// 4 members, 3 ready: removing one could leave 2 of 3, which is still a quorum.
	if _, err := runPlugin(t, "remove-member", "plug"); err != nil {
		t.Fatal(err)
	}
	fresh := &etcdv1.EtcdCluster{}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(c), fresh); err != nil {
		t.Fatal(err)
	}
	fresh.Status.ReadyMembers = 2
	if err := k8s.Status().Update(t.Context(), fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := runPlugin(t, "remove-member", "plug"); err == nil || !strings.Contains(err.Error(), "below the quorum") {
		t.Fatalf("remove-member with 2 of 3 ready: %v; want a refusal", err)
	}
	if n, _, _ := replicasAndAnnotation(t, "plug"); n != 3 {
		t.Fatalf("a refused remove-member changed replicas to %d", n)
	}
	if out, err := runPlugin(t, "remove-member", "plug", "--force"); err != nil || !strings.Contains(out, "WARNING") {
		t.Fatalf("remove-member --force: %v %s", err, out)
	}
	if n, _, _ := replicasAndAnnotation(t, "plug"); n != 2 {
		t.Fatalf("after remove-member --force: replicas %d", n)
	}

	m := newMember("plug-1", func(m *etcdv1.EtcdMember) {
		m.Spec.ClusterName = "plug"
		m.Labels = specs.MemberLabels("plug", "plug-1")
	})
	requireCreate(t, m)
	// No member Pod is ready: replacing it leaves no quorum, so only --force does it.
	if _, err := runPlugin(t, "replace-member", "plug", "plug-1"); err == nil || !strings.Contains(err.Error(), "below the quorum") {
		t.Fatalf("replace-member without quorum: %v", err)
	}
	if _, err := runPlugin(t, "replace-member", "plug", "plug-1", "--force"); err != nil {
		t.Fatal(err)
	}
	got := &etcdv1.EtcdMember{}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(m), got); err != nil || got.Annotations[plugin.AnnotationReplace] != "true" {
		t.Fatalf("replace annotation: %v %v", err, got.Annotations)
	}

	if out, err := runPlugin(t, "__complete", "status", ""); err != nil || !strings.Contains(out, "plug\n") {
		t.Fatalf("completion of clusters: %v %q", err, out)
	}
	if out, err := runPlugin(t, "__complete", "move-leader", "plug", ""); err != nil || !strings.Contains(out, "plug-1\n") {
		t.Fatalf("completion of members: %v %q", err, out)
	}
}
