package robustness

import (
	"fmt"
	"strconv"
	"time"
)

// LeaderSample is who led the cluster, as etcd said at a moment, and in which raft term.
type LeaderSample struct {
	At     time.Time
	Leader uint64
	Term   uint64
}

// Leaders is a cluster's leadership over time, its samples in the order they were taken.
type Leaders []LeaderSample

// At is the leader of the last sample taken at or before t; 0 when none was.
func (l Leaders) At(t time.Time) uint64 {
	var leader uint64
	for _, s := range l {
		if s.At.After(t) {
			break
		}
		leader = s.Leader
	}
	return leader
}

// Elections is how many times leadership was taken after the first sample: the raft terms
// that passed, each of which may have had a leader of its own. Counted in terms rather than
// in changes of the sampled leader, a leader that came and went between two samples still
// counts.
func (l Leaders) Elections() int {
	if len(l) == 0 {
		return 0
	}
	return int(l[len(l)-1].Term - l[0].Term)
}

// Turn is one member's turn in an operation that goes through the members one at a time
// (a restart, a defragmentation): the member, and when its turn was over.
type Turn struct {
	Member string
	Done   time.Time
}

// LeaderLast checks that the members' turns, in order, took the leader last: no turn but the
// last was of the member that led when the turn before it was over (for the first turn, when
// the operation began, at start), which is when the operator chose whom to take next. ids
// maps member names to their etcd member IDs. A leader that moved away on its own (an
// election) between two turns is no fault of the order.
func LeaderLast(turns []Turn, start time.Time, leaders Leaders, ids map[string]uint64) error {
	chosen := start
	for i, turn := range turns {
		leader := leaders.At(chosen)
		if leader == 0 {
			return fmt.Errorf("no leader known at %s, before %s's turn", chosen.Format(time.RFC3339Nano), turn.Member)
		}
		if i < len(turns)-1 && ids[turn.Member] == leader {
			return fmt.Errorf("member %s (%s) led when its turn came (%s), yet %d members came after it: the leader must go last",
				turn.Member, strconv.FormatUint(leader, 16), chosen.Format(time.RFC3339Nano), len(turns)-1-i)
		}
		chosen = turn.Done
	}
	return nil
}
