package specs

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs/specstest"
)

// shapes are a member's Pod as this release builds it and as earlier ones did.
var shapes = map[string]func(*corev1.Pod) *corev1.Pod{
	"annotation":               func(p *corev1.Pod) *corev1.Pod { return p },
	"flag of an older release": specstest.BuiltByAnEarlierRelease,
}

// etcd gets its initial cluster from the Pod's annotation, read by the kubelet at each
// container start, never from a flag, which would shadow the variable; what reaches etcd and
// the template hash are as they were with the flag, so no member restarts for the change.
func TestPodGivesTheInitialClusterThroughTheAnnotation(t *testing.T) {
	c := cluster()
	m := member(c, "db-1")
	pod := Pod(c, m, PodOptions{})
	ctr := pod.Spec.Containers[0]
	for _, arg := range ctr.Args {
		if strings.HasPrefix(arg, "--initial-cluster=") {
			t.Fatalf("args %v carry %s: the flag would shadow ETCD_INITIAL_CLUSTER", ctr.Args, arg)
		}
	}
	want := corev1.EnvVar{Name: "ETCD_INITIAL_CLUSTER", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		APIVersion: "v1", FieldPath: "metadata.annotations['etcd-operator.cozystack.io/initial-cluster']"}}}
	if len(ctr.Env) != 1 || ctr.Env[0].Name != want.Name || *ctr.Env[0].ValueFrom.FieldRef != *want.ValueFrom.FieldRef {
		t.Fatalf("env %+v, want only %+v", ctr.Env, want)
	}
	if got := pod.Annotations[etcdv1.AnnotationInitialCluster]; got != m.Spec.Bootstrap.InitialCluster {
		t.Fatalf("annotation %q, want the member's initial cluster %q", got, m.Spec.Bootstrap.InitialCluster)
	}
	if got := InitialClusterOf(pod); got != m.Spec.Bootstrap.InitialCluster || !ReadsInitialClusterAnnotation(pod) {
		t.Fatalf("InitialClusterOf = %q (from the annotation: %v)", got, ReadsInitialClusterAnnotation(pod))
	}
	old := specstest.BuiltByAnEarlierRelease(pod)
	if InitialClusterOf(old) != m.Spec.Bootstrap.InitialCluster || ReadsInitialClusterAnnotation(old) {
		t.Fatalf("a Pod with the flag: InitialClusterOf = %q, from the annotation %v", InitialClusterOf(old), ReadsInitialClusterAnnotation(old))
	}
	// The hashes this operator computed before the initial cluster moved into the annotation:
	// a change here restarts every member of every cluster at the operator's upgrade.
	if got := pod.Annotations[etcdv1.AnnotationPodTemplateHash]; got != "cef772965b74b334" {
		t.Errorf("template hash %s, was cef772965b74b334", got)
	}
	joined := member(c, "db-2")
	joined.Spec.Bootstrap.InitialClusterState = etcdv1.InitialClusterStateExisting
	if got := Pod(c, joined, PodOptions{}).Annotations[etcdv1.AnnotationPodTemplateHash]; got != "189b0a095d859dfe" {
		t.Errorf("template hash %s, was 189b0a095d859dfe", got)
	}
}

func TestRequireDataNamesOnlyTheMemberAndKeepsTheHash(t *testing.T) {
	for shape, build := range shapes {
		t.Run(shape, func(t *testing.T) {
			c := cluster()
			m := member(c, "db-2")
			m.Spec.Bootstrap.InitialCluster = InitialCluster(c, []string{"db-1", "db-2", "db-3"})
			m.Spec.Bootstrap.InitialClusterState = "new"
			built := build(Pod(c, m, PodOptions{}))
			pod := built.DeepCopy()
			RequireData(pod, c, m)
			if got := InitialClusterOf(pod); got != "db-2=http://db-2.db.prod.svc:2380" {
				t.Errorf("initial cluster %q, want db-2 alone", got)
			}
			args := pod.Spec.Containers[0].Args
			for _, want := range []string{"--initial-cluster-state=existing", "--name=db-2"} {
				if !slices.Contains(args, want) {
					t.Errorf("args %v lack %s", args, want)
				}
			}
			if len(args) != len(built.Spec.Containers[0].Args) {
				t.Fatalf("args %v, built %v: only the initial cluster and its state may change", args, built.Spec.Containers[0].Args)
			}
			if ReadsInitialClusterAnnotation(pod) != ReadsInitialClusterAnnotation(built) {
				t.Fatal("RequireData changed where the Pod takes its initial cluster from")
			}
			if pod.Annotations[etcdv1.AnnotationPodTemplateHash] != built.Annotations[etcdv1.AnnotationPodTemplateHash] {
				t.Fatal("the template hash changed: every running member would be restarted")
			}
			if slices.Contains(built.Spec.Containers[0].Args, "--initial-cluster-state=existing") || InitialClusterOf(built) != m.Spec.Bootstrap.InitialCluster {
				t.Fatal("RequireData changed the Pod it was given a copy of")
			}
		})
	}
}

func TestRefillsEmptyData(t *testing.T) {
	c := cluster()
	three := InitialCluster(c, []string{"db-1", "db-2", "db-3"})
	for _, tc := range []struct {
		name           string
		initial, state string
		requireData    bool
		inPlace        bool
		want           bool
	}{
		{name: "added by scale-out, peers named", initial: three, state: "existing", want: true},
		{name: "added by scale-out, restarted with RequireData", initial: three, state: "existing", requireData: true, want: false},
		{name: "added by scale-out, RequireDataInPlace", initial: three, state: "existing", inPlace: true, want: false},
		{name: "founding member: etcd refuses to bootstrap it again", initial: three, state: "new", want: false},
		{name: "founding member with RequireData", initial: three, state: "new", requireData: true, want: false},
	} {
		for shape, build := range shapes {
			t.Run(tc.name+", "+shape, func(t *testing.T) {
				m := member(c, "db-2")
				m.Spec.Bootstrap.InitialCluster = tc.initial
				m.Spec.Bootstrap.InitialClusterState = etcdv1.InitialClusterState(tc.state)
				pod := build(Pod(c, m, PodOptions{}))
				if tc.requireData {
					RequireData(pod, c, m)
				}
				if tc.inPlace {
					RequireDataInPlace(pod, c, m)
				}
				want := tc.want || (tc.inPlace && !ReadsInitialClusterAnnotation(pod)) // a flag changes only with a new Pod
				if got := RefillsEmptyData(pod, c, m); got != want {
					t.Fatalf("RefillsEmptyData = %v, want %v (args %v, annotations %v)", got, want, pod.Spec.Containers[0].Args, pod.Annotations)
				}
			})
		}
	}
}

// RequireDataInPlace changes what the Pod's metadata can change, and only where the Pod lets
// an empty data directory rejoin: never a founding member's (with state new, a lone initial
// cluster would bootstrap a new one-member cluster on empty data), never a flag.
func TestRequireDataInPlace(t *testing.T) {
	c := cluster()
	three := InitialCluster(c, []string{"db-1", "db-2", "db-3"})
	self := InitialCluster(c, []string{"db-2"})
	for _, tc := range []struct {
		name    string
		state   string
		initial string
		old     bool
		changed bool
	}{
		{name: "added by scale-out, peers named", state: "existing", initial: three, changed: true},
		{name: "added by scale-out, already alone", state: "existing", initial: self},
		{name: "founding member", state: "new", initial: three},
		{name: "added by scale-out, Pod of an older release", state: "existing", initial: three, old: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := member(c, "db-2")
			m.Spec.Bootstrap.InitialCluster = tc.initial
			m.Spec.Bootstrap.InitialClusterState = etcdv1.InitialClusterState(tc.state)
			pod := Pod(c, m, PodOptions{})
			if tc.old {
				pod = specstest.BuiltByAnEarlierRelease(pod)
			}
			before := pod.DeepCopy()
			if got := RequireDataInPlaceChanges(pod, c, m); got != tc.changed || !reflect.DeepEqual(pod, before) {
				t.Fatalf("RequireDataInPlaceChanges = %v, want %v, and the Pod unchanged", got, tc.changed)
			}
			if got := RequireDataInPlace(pod, c, m); got != tc.changed {
				t.Fatalf("RequireDataInPlace = %v, want %v", got, tc.changed)
			}
			wantInitial := tc.initial
			if tc.changed {
				wantInitial = self
			}
			if got := InitialClusterOf(pod); got != wantInitial {
				t.Errorf("initial cluster %q, want %q", got, wantInitial)
			}
			if tc.changed {
				before.Annotations[etcdv1.AnnotationInitialCluster] = self
			}
			if !reflect.DeepEqual(pod, before) {
				t.Errorf("changed more than the annotation: args %v, annotations %v", pod.Spec.Containers[0].Args, pod.Annotations)
			}
		})
	}
}
