package kit

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
)

// Backoff is a per-cluster exponential backoff, made on first use so that a zero value (a
// zero reconciler) works.
type Backoff struct {
	once    sync.Once
	limiter workqueue.TypedRateLimiter[types.NamespacedName]
}

// Get is the rate limiter, from..to; the first call's bounds are the ones kept.
func (b *Backoff) Get(from, to time.Duration) workqueue.TypedRateLimiter[types.NamespacedName] {
	b.once.Do(func() {
		b.limiter = workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](from, to)
	})
	return b.limiter
}
