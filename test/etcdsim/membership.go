package etcdsim

import (
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errLeaderTransferTimeout is etcd's ErrTimeoutLeaderTransfer as its gRPC layer sends it;
// rpctypes has no variable for it.
var errLeaderTransferTimeout = status.Error(codes.Unavailable, "etcdserver: request timed out, leader transfer took too long")

// Membership changes with etcd's checks, in etcd's order, under Sim.mu. Each change is one
// raft entry (index); a new leader is one more and a new term.

func (c *cluster) find(id uint64) int {
	return slices.IndexFunc(c.members, func(m member) bool { return m.id == id })
}

func (c *cluster) sort() {
	slices.SortFunc(c.members, func(a, b member) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
}

// elect keeps a running voter as leader, or makes the first running voter leader once a
// quorum of voters runs; otherwise the cluster has no leader, as raft would have none.
func (c *cluster) elect() {
	if i := c.find(c.leader); c.leader != 0 && i >= 0 && c.members[i].running && !c.members[i].learner {
		return
	}
	c.leader = 0
	voters, running := 0, 0
	var first uint64
	for _, m := range c.members {
		if m.learner {
			continue
		}
		voters++
		if m.running {
			running++
			if first == 0 {
				first = m.id
			}
		}
	}
	if running >= voters/2+1 {
		c.leader = first
		c.term++
		c.index++ // a new leader appends an empty entry
	}
}

// addLearner adds an unstarted learner with a random ID, as MemberAdd with IsLearner does.
func (s *Sim) addLearner(c *cluster, peerURLs []string) (member, error) {
	if len(peerURLs) == 0 {
		return member{}, rpctypes.ErrGRPCMemberBadURLs
	}
	for _, u := range peerURLs {
		if _, err := hostPort(u); err != nil {
			return member{}, rpctypes.ErrGRPCMemberBadURLs
		}
	}
	if c.leader == 0 {
		return member{}, rpctypes.ErrGRPCNoLeader
	}
	learners := 0
	for _, m := range c.members {
		if slices.ContainsFunc(m.peerURLs, func(u string) bool { return slices.Contains(peerURLs, u) }) {
			return member{}, rpctypes.ErrGRPCPeerURLExist
		}
		if m.learner {
			learners++
		}
	}
	if learners >= s.opts.MaxLearners {
		return member{}, rpctypes.ErrGRPCTooManyLearners
	}
	m := member{id: s.newID(c), peerURLs: slices.Clone(peerURLs), learner: true}
	c.members = append(c.members, m)
	c.sort()
	s.route(c, m)
	c.index++
	return m, nil
}

// newID is a random ID no member has; etcd hashes the peer URLs with the time, which is as
// good as random.
func (s *Sim) newID(c *cluster) uint64 {
	for {
		if id := rand.Uint64(); id != 0 && c.find(id) < 0 {
			return id
		}
	}
}

// startAdded starts a learner the operator just added, unless the simulation waits for
// StartProcess; after Options.StartDelay, if one is set, as a Pod takes a while to start.
func (s *Sim) startAdded(c *cluster, id uint64) {
	if s.opts.ManualStart {
		return
	}
	if s.opts.StartDelay <= 0 {
		s.startDerived(c, id)
		return
	}
	time.AfterFunc(s.opts.StartDelay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.clusters[c.id] == c {
			s.startDerived(c, id)
		}
	})
}

// startDerived starts an unstarted member with the name and client URL its Pod would give
// it: the name is the first label of its peer URL's host (the operator names hosts after
// members), the client URL has the scheme and port of the other members' client URLs.
func (s *Sim) startDerived(c *cluster, id uint64) {
	i := c.find(id)
	if i < 0 || c.members[i].name != "" {
		return // removed meanwhile, or started by StartProcess
	}
	peer, err := url.Parse(c.members[i].peerURLs[0])
	if err != nil {
		return
	}
	name, _, _ := strings.Cut(peer.Hostname(), ".")
	client := url.URL{Scheme: "http", Host: peer.Hostname() + ":2379"}
	for _, m := range c.members {
		if u, err := url.Parse(firstOr(m.clientURLs)); err == nil && u.Host != "" {
			client.Scheme, client.Host = u.Scheme, peer.Hostname()+":"+u.Port()
			break
		}
	}
	s.start(c, id, name, []string{client.String()})
}

func firstOr(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// promote makes a caught-up learner a voter. etcd checks that the member has caught up
// before it checks that it is a learner, so a voter that is not running is "not ready".
func (c *cluster) promote(id uint64) error {
	if c.leader == 0 {
		return rpctypes.ErrGRPCNoLeader
	}
	i := c.find(id)
	switch {
	case i < 0:
		return rpctypes.ErrGRPCMemberNotFound
	case !c.members[i].running:
		return rpctypes.ErrGRPCLearnerNotReady
	case !c.members[i].learner:
		return rpctypes.ErrGRPCMemberNotLearner
	}
	c.members[i].learner = false
	c.index++
	return nil
}

// remove takes a member out. With --strict-reconfig-check (the operator sets it) etcd keeps
// a quorum of started voters among the remaining ones.
func (s *Sim) remove(c *cluster, id uint64) error {
	if c.leader == 0 {
		return rpctypes.ErrGRPCNoLeader
	}
	i := c.find(id)
	if i < 0 {
		return rpctypes.ErrGRPCMemberNotFound
	}
	if !c.members[i].learner && !c.readyToRemoveVoter(id) {
		return rpctypes.ErrGRPCMemberNotEnoughStarted
	}
	s.unroute(c.members[i])
	c.members = slices.Delete(c.members, i, i+1)
	c.index++
	c.elect()
	return nil
}

// readyToRemoveVoter is etcd's IsReadyToRemoveVotingMember: "started" means published a name.
func (c *cluster) readyToRemoveVoter(id uint64) bool {
	voters, started := 0, 0
	for _, m := range c.members {
		if m.learner || m.id == id {
			continue
		}
		voters++
		if m.name != "" {
			started++
		}
	}
	return started >= voters/2+1
}

// moveLeader hands leadership from self (which must lead) to the voter to.
func (c *cluster) moveLeader(self, to uint64) error {
	if c.leader != self {
		return rpctypes.ErrGRPCNotLeader
	}
	i := c.find(to)
	if i < 0 || c.members[i].learner {
		return rpctypes.ErrGRPCBadLeaderTransferee
	}
	if !c.members[i].running {
		return errLeaderTransferTimeout // raft never hears from it
	}
	if to != self {
		c.leader = to
		c.term++
		c.index++
	}
	return nil
}
