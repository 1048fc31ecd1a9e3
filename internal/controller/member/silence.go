package member

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// silenceHeld is how long a cluster whose etcd did not answer a member's question is taken
// to stay silent for its other members: as long as the question waited (joined's deadline).
const silenceHeld = 5 * time.Second

// silences remembers, per cluster, that its etcd did not answer, so that its other members'
// reconciles fail at once instead of each waiting the deadline out. A cluster whose Pods are
// all gone (its namespace being deleted, a lost zone) held the member workers 5 s per member
// per retry: with 4 workers, two such clusters of 4 members kept every worker busy, and a
// healthy cluster's new member waited 6 s for its PVC and Pod. The answer it gives is the
// one a member would have got (an error: the conservative one, which starts nothing empty),
// only sooner; an answer from the cluster forgets the silence.
type silences struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]silence
}

type silence struct {
	at  time.Time
	err error
}

// recent is the error a question to the cluster's etcd failed with within silenceHeld of now,
// nil when there was none.
func (s *silences) recent(cluster types.NamespacedName, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.seen[cluster]
	if !ok || now.Sub(last.at) >= silenceHeld {
		return nil
	}
	return fmt.Errorf("etcd did not answer another member's question %s ago: %w", now.Sub(last.at).Round(time.Millisecond), last.err)
}

// note records the outcome of a question to the cluster's etcd: a failure (err) is held, an
// answer forgets it.
func (s *silences) note(cluster types.NamespacedName, now time.Time, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.seen, cluster)
		return
	}
	if s.seen == nil {
		s.seen = map[types.NamespacedName]silence{}
	}
	s.seen[cluster] = silence{at: now, err: err}
}
