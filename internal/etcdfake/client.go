package etcdfake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// begin records a call and decides its fate: a non-nil early error means the
// call fails without effect; lost is an error to return after applying it.
// The caller must hold f.mu.
func (f *Cluster) begin(ctx context.Context, method, args string) (early, lost error) {
	f.calls = append(f.calls, method+"("+args+")")
	if f.closed {
		return ErrClosed, nil
	}
	if err := ctx.Err(); err != nil {
		return err, nil
	}
	queue := f.failures[method]
	if len(queue) == 0 {
		return nil, nil
	}
	next := queue[0]
	f.failures[method] = queue[1:]
	if next.applied {
		return nil, next.err
	}
	return next.err, nil
}

// withQuorum fails cluster-wide requests when raft could not commit them.
func (f *Cluster) withQuorum() error {
	if f.leader == 0 {
		return ErrNoQuorum
	}
	return nil
}

func (f *Cluster) MemberList(ctx context.Context) (uint64, []etcd.Member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "MemberList", "")
	if err := firstError(early, f.withQuorum()); err != nil {
		return 0, nil, err
	}
	if lost != nil {
		return 0, nil, lost
	}
	return f.clusterID, f.memberList(), nil
}

func (f *Cluster) AddLearner(ctx context.Context, peerURLs []string) (etcd.Member, []etcd.Member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "AddLearner", strings.Join(peerURLs, ","))
	if err := firstError(early, f.withQuorum(), f.checkAddLearner(peerURLs)); err != nil {
		return etcd.Member{}, nil, err
	}
	added := f.newMember(peerURLs, true)
	if lost != nil {
		return etcd.Member{}, nil, lost
	}
	return copyMember(added.Member), f.memberList(), nil
}

func (f *Cluster) checkAddLearner(peerURLs []string) error {
	if len(peerURLs) == 0 {
		return fmt.Errorf("etcdfake: AddLearner without peer URLs")
	}
	learners := 0
	for _, m := range f.members {
		if slices.ContainsFunc(peerURLs, func(u string) bool { return slices.Contains(m.PeerURLs, u) }) {
			return fmt.Errorf("etcdfake: peer URLs %v: %w", peerURLs, etcd.ErrMemberExists)
		}
		if m.IsLearner {
			learners++
		}
	}
	if learners >= f.maxLearners {
		return fmt.Errorf("etcdfake: %d learner(s) already: %w", learners, etcd.ErrTooManyLearners)
	}
	return nil
}

// Promote records the leader's endpoint the caller named, if any, as "Promote(4 via
// http://m1:2379)"; which member the request reaches changes nothing in the model.
func (f *Cluster) Promote(ctx context.Context, id uint64, leader string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	args := etcd.FormatID(id)
	if leader != "" {
		args += " via " + leader
	}
	early, lost := f.begin(ctx, "Promote", args)
	if err := firstError(early, f.withQuorum(), f.checkPromote(id)); err != nil {
		return err
	}
	f.find(id).IsLearner = false
	return lost
}

func (f *Cluster) checkPromote(id uint64) error {
	m := f.find(id)
	switch {
	case m == nil:
		return fmt.Errorf("etcdfake: promote %x: %w", id, etcd.ErrMemberNotFound)
	case !m.IsLearner:
		return fmt.Errorf("etcdfake: promote %x: %w", id, etcd.ErrMemberNotLearner)
	case !m.caughtUp:
		return fmt.Errorf("etcdfake: promote %x: %w", id, etcd.ErrLearnerNotReady)
	}
	return nil
}

func (f *Cluster) Remove(ctx context.Context, id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "Remove", etcd.FormatID(id))
	if err := firstError(early, f.withQuorum()); err != nil {
		return err
	}
	if f.find(id) == nil {
		return fmt.Errorf("etcdfake: remove %x: %w", id, etcd.ErrMemberNotFound)
	}
	f.members = slices.DeleteFunc(f.members, func(m *memberState) bool { return m.ID == id })
	f.electIfNeeded()
	return lost
}

func (f *Cluster) Status(ctx context.Context, endpoint string) (etcd.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "Status", endpoint)
	m, err := f.serving(endpoint)
	if err := firstError(early, err, lost); err != nil {
		return etcd.Status{}, err
	}
	st := etcd.Status{
		MemberID:    m.ID,
		ClusterID:   f.clusterID,
		Leader:      f.leader,
		Version:     f.memberVersion(m),
		DBSize:      m.dbSize,
		DBSizeInUse: m.dbSizeInUse,
		RaftTerm:    1,
		IsLearner:   m.IsLearner,
	}
	if reportsDowngrade(st.Version) {
		f.settleVersions()
		info := f.downgradeInfo()
		st.Downgrade, st.StorageVersion = &info, f.downgrade.clusterVersion.String()
	}
	return st, nil
}

func (f *Cluster) Healthy(ctx context.Context, endpoint string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "Healthy", endpoint)
	m, err := f.serving(endpoint)
	if err == nil && m.unhealthy {
		err = fmt.Errorf("%s (member %x fails quorum reads): %w", endpoint, m.ID, ErrNoQuorum)
	}
	return firstError(early, err, f.withQuorum(), lost)
}

func (f *Cluster) MoveLeader(ctx context.Context, to uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "MoveLeader", etcd.FormatID(to))
	if err := firstError(early, f.withQuorum()); err != nil {
		return err
	}
	m := f.find(to)
	if m == nil || m.IsLearner {
		return fmt.Errorf("etcdfake: move leader to %x: %w", to, etcd.ErrBadLeaderTransferee)
	}
	if m.down {
		return fmt.Errorf("etcdfake: move leader to %x: %w", to, ErrUnreachable)
	}
	f.leader = to
	return lost
}

func (f *Cluster) Defragment(ctx context.Context, endpoint string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "Defragment", endpoint)
	m, err := f.serving(endpoint)
	if err := firstError(early, err); err != nil {
		return err
	}
	m.dbSize = m.dbSizeInUse
	return lost
}

// CompactToCurrent compacts at revision 1 + the number of calls so far; it frees no space
// in the model (SetDBSize decides what Defragment gives back).
func (f *Cluster) CompactToCurrent(ctx context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "CompactToCurrent", "")
	if err := firstError(early, f.withQuorum(), lost); err != nil {
		return 0, err
	}
	f.compactions++
	return int64(f.compactions), nil
}

// CompactKeeping is CompactToCurrent recorded with keep: the model has no revisions.
func (f *Cluster) CompactKeeping(ctx context.Context, keep int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "CompactKeeping", strconv.FormatInt(keep, 10))
	if err := firstError(early, f.withQuorum(), lost); err != nil {
		return 0, err
	}
	f.compactions++
	return int64(f.compactions), nil
}

func (f *Cluster) Alarms(ctx context.Context) ([]etcd.Alarm, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "Alarms", "")
	if err := firstError(early, f.withQuorum(), lost); err != nil {
		return nil, err
	}
	return slices.Clone(f.alarms), nil
}

func (f *Cluster) DisarmAlarm(ctx context.Context, a etcd.Alarm) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "DisarmAlarm", a.Type+","+etcd.FormatID(a.MemberID))
	if err := firstError(early, f.withQuorum()); err != nil {
		return err
	}
	if a.MemberID == 0 || (a.Type != etcd.AlarmNoSpace && a.Type != etcd.AlarmCorrupt) {
		return fmt.Errorf("etcdfake: invalid alarm %+v", a)
	}
	f.alarms = slices.DeleteFunc(f.alarms, func(x etcd.Alarm) bool { return x == a })
	return lost
}

func (f *Cluster) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(context.Background(), "Close", "")
	if early != nil && !errors.Is(early, ErrClosed) {
		return early
	}
	f.closed = true
	return lost
}

// KeepOpen is cli with a Close that closes nothing: what a reconciler under test gets from
// its client factory, so that it may close "its" client after each reconcile while the test
// goes on with the shared fake.
func KeepOpen(cli etcd.Client) etcd.Client { return keepOpen{cli} }

type keepOpen struct{ etcd.Client }

func (keepOpen) Close() error { return nil }

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
