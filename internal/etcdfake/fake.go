// Package etcdfake is an in-memory, deterministic stand-in for etcd.Client
// that records every call, so controller unit tests can assert exactly which
// membership operations were made, in which order, and that none was repeated.
//
// The model is deliberately small: members with sequential IDs (1, 2, 3...),
// learners that can be promoted only once the test marks them caught up, a
// leader, members that the test takes down, alarms, and per-method injected
// errors. It follows etcd's error contract (the sentinels of package etcd).
package etcdfake

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// Errors the fake returns where a real client would fail on the network.
var (
	// ErrUnreachable: the endpoint belongs to no member, or its member is down.
	ErrUnreachable = errors.New("etcdfake: endpoint unreachable")
	// ErrNoQuorum: fewer than a quorum of voters are up, so nothing commits.
	ErrNoQuorum = errors.New("etcdfake: no quorum")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("etcdfake: client closed")
)

// Defaults of a new Cluster.
const (
	DefaultClusterID   uint64 = 0xc1a5e4
	DefaultVersion            = "3.6.16"
	DefaultDBSize             = 1 << 20
	DefaultDBSizeInUse        = 1 << 19
	defaultMaxLearners        = 1 // etcd's --max-learners default
)

// methods lists the names FailNext accepts: the methods of etcd.Client.
var methods = []string{
	"MemberList", "AddLearner", "Promote", "Remove", "Status", "Healthy",
	"MoveLeader", "Defragment", "CompactToCurrent", "CompactKeeping", "Alarms", "DisarmAlarm", "Close",
	"DowngradeValidate", "DowngradeEnable", "DowngradeCancel",
	"AuthStatus", "Authenticate", "UserAdd", "UserGrantRole", "UserChangePassword", "AuthEnable",
}

// injected is an error queued for a method; applied says whether the call
// still takes effect (a lost response) or not (a refused request).
type injected struct {
	err     error
	applied bool
}

type memberState struct {
	etcd.Member
	caughtUp    bool
	down        bool
	unhealthy   bool // answers Status but fails quorum reads (Healthy)
	dbSize      int64
	dbSizeInUse int64
	version     string // "" = the cluster's (SetVersion)
}

// Cluster is a fake etcd cluster and a client of it. Safe for concurrent use.
type Cluster struct {
	mu          sync.Mutex
	clusterID   uint64
	version     string
	maxLearners int
	nextID      uint64
	members     []*memberState // in the order they were added
	leader      uint64
	alarms      []etcd.Alarm
	compactions int
	failures    map[string][]injected
	calls       []string
	closed      bool
	authEnabled bool
	users       map[string]*user
	roles       []string // roles other than root, made with SeedRole
	downgrade   downgradeState
}

var _ etcd.Client = (*Cluster)(nil)

// New returns an empty cluster; seed it with SeedMember.
func New() *Cluster {
	return &Cluster{
		clusterID:   DefaultClusterID,
		version:     DefaultVersion,
		maxLearners: defaultMaxLearners,
		nextID:      1,
		failures:    map[string][]injected{},
		users:       map[string]*user{},
	}
}

// SeedMember adds a started voter, as if bootstrapped with --initial-cluster.
// The first voter becomes leader. Not recorded in Calls.
func (f *Cluster) SeedMember(name, peerURL, clientURL string) etcd.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.newMember([]string{peerURL}, false)
	m.Name, m.ClientURLs = name, []string{clientURL}
	m.caughtUp = true
	if f.leader == 0 {
		f.leader = m.ID
	}
	return copyMember(m.Member)
}

// StartMember is what a joining member's process does: it publishes its name
// and client URL. Not recorded in Calls.
func (f *Cluster) StartMember(id uint64, name, clientURL string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.mustFind(id)
	m.Name, m.ClientURLs = name, []string{clientURL}
}

// SetCaughtUp marks whether a learner is in sync with the leader, which is
// what Promote requires.
func (f *Cluster) SetCaughtUp(id uint64, caughtUp bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustFind(id).caughtUp = caughtUp
}

// SetDown stops (or restarts) a member's process: its endpoint becomes
// unreachable, and if it led, the first remaining voter takes over as long as
// a quorum is up.
func (f *Cluster) SetDown(id uint64, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustFind(id).down = down
	f.electIfNeeded()
}

// SetUnhealthy makes a member that is up fail Healthy (a quorum read through it) while it
// still answers Status and counts toward raft's quorum, like a member behind a slow disk.
func (f *Cluster) SetUnhealthy(id uint64, unhealthy bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustFind(id).unhealthy = unhealthy
}

// SetLeader makes a voter the leader, as an election would.
func (f *Cluster) SetLeader(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.mustFind(id); m.IsLearner {
		panic(fmt.Sprintf("etcdfake: learner %x cannot lead", id))
	}
	f.leader = id
}

// SetDBSize sets what Status reports for a member's backend; Defragment
// shrinks DBSize to DBSizeInUse.
func (f *Cluster) SetDBSize(id uint64, size, inUse int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.mustFind(id)
	m.dbSize, m.dbSizeInUse = size, inUse
}

// SetVersion sets the server version every member's Status reports (SetMemberVersion's are
// forgotten).
func (f *Cluster) SetVersion(v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version = v
	for _, m := range f.members {
		m.version = ""
	}
}

// SetMaxLearners changes the learner limit (etcd's --max-learners).
func (f *Cluster) SetMaxLearners(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.maxLearners = n
}

// RaiseAlarm raises an alarm as a member would.
func (f *Cluster) RaiseAlarm(a etcd.Alarm) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.alarms, a) {
		f.alarms = append(f.alarms, a)
	}
}

// FailNext makes the next call of method fail with err without taking effect.
// Several queued errors are used up in order. method must name a method of
// etcd.Client.
func (f *Cluster) FailNext(method string, err error) {
	f.inject(method, injected{err: err})
}

// LoseNextResponse makes the next call of method take effect and still return
// err, like a request whose response was lost (a timeout after etcd applied it).
func (f *Cluster) LoseNextResponse(method string, err error) {
	f.inject(method, injected{err: err, applied: true})
}

func (f *Cluster) inject(method string, in injected) {
	if !slices.Contains(methods, method) {
		panic(fmt.Sprintf("etcdfake: no method %q; want one of %v", method, methods))
	}
	if in.err == nil {
		panic("etcdfake: injected error must not be nil")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[method] = append(f.failures[method], in)
}

// Calls returns the calls made so far, e.g. "AddLearner(http://m3:2380)" or
// "Promote(4)" (IDs in etcd's hex; "Promote(4 via http://m1:2379)" when the caller named the
// leader's endpoint), including calls that failed.
func (f *Cluster) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// CallsTo returns the recorded calls of one method.
func (f *Cluster) CallsTo(method string) []string {
	var out []string
	for _, c := range f.Calls() {
		if strings.HasPrefix(c, method+"(") {
			out = append(out, c)
		}
	}
	return out
}

// ResetCalls forgets the recorded calls, e.g. after a test's setup.
func (f *Cluster) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// Members returns the current membership without recording a call.
func (f *Cluster) Members() []etcd.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.memberList()
}

// Leader returns the current leader's ID (0 without quorum) without recording a call.
func (f *Cluster) Leader() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}

// ClusterID returns the cluster's ID.
func (f *Cluster) ClusterID() uint64 { return f.clusterID }

// ForceNewCluster is what etcd started with --force-new-cluster does with a member's data:
// the membership becomes that member alone, and it leads. Not recorded in Calls.
func (f *Cluster) ForceNewCluster(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.mustFind(id)
	m.down = false
	f.members = []*memberState{m}
	f.leader = id
}

// SetClusterID gives the cluster another ID, as a cluster founded again from a snapshot has.
func (f *Cluster) SetClusterID(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clusterID = id
}
