package cluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// etcdPod is a member Pod whose etcd container runs (running) or has exited, Ready or not.
func etcdPod(uid types.UID, running, ready bool) *corev1.Pod {
	state := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}
	if running {
		state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	}
	readiness := corev1.ConditionFalse
	if ready {
		readiness = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-2", Namespace: "ns", UID: uid},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: readiness}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: specs.ContainerName, State: state}},
		},
	}
}

func TestStoppedSinceAsked(t *testing.T) {
	asked := etcdPod("a", true, false)
	for _, tc := range []struct {
		name string
		now  *corev1.Pod
		want bool
	}{
		{"the Pod is gone", nil, true},
		{"another Pod under the name", etcdPod("b", true, false), true},
		{"its etcd exited", etcdPod("a", false, false), true},
		{"its etcd still runs", etcdPod("a", true, false), false},
		{"its etcd became Ready", etcdPod("a", true, true), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stoppedSinceAsked(asked, tc.now); got != tc.want {
				t.Fatalf("stoppedSinceAsked = %v, want %v", got, tc.want)
			}
		})
	}
}

// An ask of a starting member ends once the cache shows its etcd exited, long before the
// ask's own deadline.
func TestAskContextEndsWhenEtcdExits(t *testing.T) {
	starting := etcdPod("a", true, false)
	api := fake.NewClientBuilder().WithObjects(starting.DeepCopy()).Build()
	r := &Reconciler{Client: api}
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()

	askCtx, cancel := r.askContext(ctx, starting)
	defer cancel()
	exited := etcdPod("a", false, false)
	exited.ResourceVersion = ""
	current := &corev1.Pod{}
	if err := api.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "db-2"}, current); err != nil {
		t.Fatal(err)
	}
	current.Status = exited.Status
	if err := api.Status().Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	select {
	case <-askCtx.Done():
	case <-ctx.Done():
		t.Fatal("the ask of a member whose etcd exited was not ended")
	}

}

func TestAskWatched(t *testing.T) {
	deleting := etcdPod("a", true, true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"no Pod", nil, false},
		{"a serving member is given its whole time", etcdPod("a", true, true), false},
		{"a starting member", etcdPod("a", true, false), true},
		{"a stopping member", deleting, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := askWatched(tc.pod); got != tc.want {
				t.Fatalf("askWatched = %v, want %v", got, tc.want)
			}
		})
	}
}
