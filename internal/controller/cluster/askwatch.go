package cluster

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
)

// askPoll is how often an ask of a starting member looks at the cache for its etcd's exit.
// A cache read costs microseconds; the exit it finds ends an ask that would otherwise wait out
// askStarting.
const askPoll = 50 * time.Millisecond

// stoppedSinceAsked reports whether the Pod a look asked (asked) no longer runs the etcd it
// asked, by the Pod the cache holds now (nil: gone): another Pod under the name, or the etcd
// container no longer running (it exited, or waits in a back-off).
func stoppedSinceAsked(asked, now *corev1.Pod) bool {
	if now == nil {
		return true
	}
	return now.UID != asked.UID || kit.EtcdStopped(now)
}

// askWatched: an ask of the member whose Pod is pod is watched for its etcd's exit. One whose
// Pod serves is given its whole time (a loaded etcd may be slow to answer); with no Pod
// there is nothing to watch.
func askWatched(pod *corev1.Pod) bool {
	return pod != nil && !podServes(pod)
}

// askContext is the context an ask of the member whose Pod is pod runs under. A member whose
// Pod serves keeps ctx. A starting one's ask also ends as soon as the cache shows its etcd
// stopped: a member that exits at once on its data (a wiped disk, a removed ID) keeps the
// gRPC client retrying until the ask's deadline, and the look that would decide its
// replacement came a whole askStarting later. The look ends sooner, with the member not
// answering; the Pod's change that stopped the ask brings the next look at once.
func (r *Reconciler) askContext(ctx context.Context, pod *corev1.Pod) (context.Context, context.CancelFunc) {
	askCtx, cancel := context.WithCancel(ctx)
	if !askWatched(pod) {
		return askCtx, cancel
	}
	key := client.ObjectKeyFromObject(pod)
	go func() {
		tick := time.NewTicker(askPoll)
		defer tick.Stop()
		for {
			select {
			case <-askCtx.Done():
				return
			case <-tick.C:
			}
			now := &corev1.Pod{}
			if err := r.Get(askCtx, key, now); client.IgnoreNotFound(err) != nil {
				continue // the cache could not say: keep asking until the deadline
			} else if err != nil {
				now = nil
			}
			if stoppedSinceAsked(pod, now) {
				cancel()
				return
			}
		}
	}()
	return askCtx, cancel
}
