package specs

import (
	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"

	"slices"
	"testing"
)

func TestRequireDataNamesOnlyTheMemberAndKeepsTheHash(t *testing.T) {
	c := cluster()
	m := member(c, "db-2")
	m.Spec.Bootstrap.InitialCluster = InitialCluster(c, []string{"db-1", "db-2", "db-3"})
	m.Spec.Bootstrap.InitialClusterState = "new"
	built := Pod(c, m, PodOptions{})
	pod := built.DeepCopy()
	RequireData(pod, c, m)
	args := pod.Spec.Containers[0].Args
	for _, want := range []string{
		"--initial-cluster=db-2=http://db-2.db.prod.svc:2380",
		"--initial-cluster-state=existing",
		"--name=db-2",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	if len(args) != len(built.Spec.Containers[0].Args) {
		t.Fatalf("args %v, built %v: only the two flags may change", args, built.Spec.Containers[0].Args)
	}
	if pod.Annotations[etcdv1.AnnotationPodTemplateHash] != built.Annotations[etcdv1.AnnotationPodTemplateHash] {
		t.Fatal("the template hash changed: every running member would be restarted")
	}
	if slices.Contains(built.Spec.Containers[0].Args, "--initial-cluster-state=existing") {
		t.Fatal("RequireData changed the Pod it was given a copy of")
	}
}

func TestRefillsEmptyData(t *testing.T) {
	c := cluster()
	three := InitialCluster(c, []string{"db-1", "db-2", "db-3"})
	for _, tc := range []struct {
		name           string
		initial, state string
		requireData    bool
		want           bool
	}{
		{name: "added by scale-out, peers named", initial: three, state: "existing", want: true},
		{name: "added by scale-out, restarted with RequireData", initial: three, state: "existing", requireData: true, want: false},
		{name: "founding member: etcd refuses to bootstrap it again", initial: three, state: "new", want: false},
		{name: "founding member with RequireData", initial: three, state: "new", requireData: true, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := member(c, "db-2")
			m.Spec.Bootstrap.InitialCluster = tc.initial
			m.Spec.Bootstrap.InitialClusterState = etcdv1.InitialClusterState(tc.state)
			pod := Pod(c, m, PodOptions{})
			if tc.requireData {
				RequireData(pod, c, m)
			}
			if got := RefillsEmptyData(pod, c, m); got != tc.want {
				t.Fatalf("RefillsEmptyData = %v, want %v (args %v)", got, tc.want, pod.Spec.Containers[0].Args)
			}
		})
	}
}
