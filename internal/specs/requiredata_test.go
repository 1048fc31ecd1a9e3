package specs

import (
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
	if pod.Annotations[AnnotationPodTemplateHash] != built.Annotations[AnnotationPodTemplateHash] {
		t.Fatal("the template hash changed: every running member would be restarted")
	}
	if slices.Contains(built.Spec.Containers[0].Args, "--initial-cluster-state=existing") {
		t.Fatal("RequireData changed the Pod it was given a copy of")
	}
}
