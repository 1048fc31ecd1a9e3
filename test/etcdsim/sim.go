// Package etcdsim answers etcd's client API for many etcd clusters from one process, so that
// one operator can be measured against thousands of EtcdClusters on a machine that could not
// run their etcd processes. It keeps membership (IDs, names, URLs, learners, the leader) the
// way etcd does and nothing else: there is no key-value store behind Range.
//
// One gRPC server serves every member of every cluster. Which member a call is for comes
// from the :authority the client dialled: clientv3 sets it to the host:port of the endpoint
// (e.g. "db-1.db.ns.svc:2379"), which is matched against the members' client URLs. For that
// to work, every member's DNS name must resolve to this process; in tests, DialOptions sends
// every connection to one listener instead.
//
// Only the calls the operator's internal/etcd client makes are served: Cluster's MemberList,
// MemberAdd (learners), MemberPromote and MemberRemove; Maintenance's Status, Alarm,
// Defragment and MoveLeader; KV's Range and Compact; Auth's AuthStatus and Authenticate
// (authentication is always off). Everything else answers codes.Unimplemented. Errors are
// etcd's own (rpctypes.ErrGRPC...), in the order etcd checks them.
//
// # How a cluster comes to be
//
// A real member exists once its Pod runs etcd. Whoever "runs" an etcd Pod without a process
// (package simnode, see "Simulated nodes") calls StartProcess with what the Pod's
// etcd would be started with (ParseArgs reads the flags of specs.EtcdArgs), and StopProcess
// when the Pod's container ends:
//
//   - --initial-cluster-state=new: the first member to start creates the cluster from
//     --initial-cluster and --initial-cluster-token, with etcd's own member and cluster IDs;
//     the others find it. A cluster has a leader once a quorum of its voters runs.
//   - --initial-cluster-state=existing: the member must have been added (AddLearner) before;
//     it is found by its peer URL and publishes its name and client URLs.
//   - A member that ran before (a restarted Pod) is found by its peer URL in either case.
//
// By default (Options.ManualStart false) a learner the operator adds starts at once, with a
// name and client URL derived from its peer URL (see startAdded), so that a scale-out
// completes even when nobody calls StartProcess. Bootstrap is the short way for tests and the
// command: every member of a new cluster starts at once. DeleteCluster forgets a cluster
// whose EtcdCluster is gone, so that a new one with the same names starts afresh.
//
// # Simulated nodes
//
// Package simnode (test/etcdsim/simnode) runs member Pods against a Sim: a Node in the API,
// kept Ready by its Lease, that calls StartProcess for each member Pod bound to it and
// StopProcess when the Pod goes, and reports the Pods Running and Ready at the address this
// server listens on. An EtcdCluster's members land there with simnode.Placement.
//
// # Memory
//
// A three-member cluster costs about 1.4 KiB of heap (BenchmarkClusters reports it; the
// test holds it under 4 KiB), so 5,000 cost about 7 MiB. All state is guarded by one mutex: every call is a few map and slice look-ups.
package etcdsim

import (
	"fmt"
	"net/url"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Version is what Status reports as the server version.
const Version = "3.6.16"

// Sizes a fresh etcd 3.6 reports: its backend file, the part in use, the default quota.
const (
	freshDBSize      = 20480
	freshDBSizeInUse = 16384
	defaultQuota     = 2 << 30
)

// Member is a member as etcd's --name, --initial-advertise-peer-urls and
// --advertise-client-urls describe it.
type Member struct {
	Name       string
	PeerURLs   []string
	ClientURLs []string
}

// Options change how the simulation behaves; the zero value is what a scale-out needs.
type Options struct {
	// MaxLearners is etcd's --max-learners; 0 means etcd's default, 1.
	MaxLearners int
	// ManualStart leaves an added learner unstarted until StartProcess is called for it.
	ManualStart bool
	// StartDelay is how long an added learner takes to start when ManualStart is false, as
	// its Pod would; 0 starts it at once.
	StartDelay time.Duration
}

// Sim is the state of every simulated cluster. It is safe for concurrent use.
type Sim struct {
	opts Options

	mu       sync.Mutex
	clusters map[uint64]*cluster
	// hosts maps the host:port of every member's peer and client URLs to the member:
	// client URLs route calls, peer URLs find the member a starting process is.
	hosts map[string]endpoint
}

type endpoint struct {
	c  *cluster
	id uint64
}

type cluster struct {
	id       uint64
	members  []member // sorted by ID, as etcd lists them
	leader   uint64   // 0 while fewer than a quorum of voters run
	term     uint64
	index    uint64 // raft index: one entry per membership change and election
	revision int64
	// compacted is the revision compacted to; db sizes are the cluster's, not each member's.
	compacted       int64
	dbSize, dbInUse int64
	alarms          []*pb.AlarmMember
}

type member struct {
	id         uint64
	name       string // "" until the member's process starts (etcd's "unstarted")
	peerURLs   []string
	clientURLs []string
	learner    bool
	running    bool // its process runs: it answers calls on its client URLs
}

// New returns an empty simulation.
func New(opts Options) *Sim {
	if opts.MaxLearners <= 0 {
		opts.MaxLearners = 1
	}
	return &Sim{opts: opts, clusters: map[uint64]*cluster{}, hosts: map[string]endpoint{}}
}

// Bootstrap creates a cluster of voters, as the operator's bootstrap makes one, and starts
// every member; it returns the cluster ID. Calling it again for the same members is a no-op.
func (s *Sim) Bootstrap(token string, members []Member) (uint64, error) {
	var clusterID uint64
	for _, m := range members {
		id, _, err := s.StartProcess(Boot{Member: m, InitialCluster: members, Token: token, New: true})
		if err != nil {
			return 0, err
		}
		clusterID = id
	}
	return clusterID, nil
}

// Lookup says which cluster and member a host:port (of a client or peer URL) belongs to.
func (s *Sim) Lookup(hostPort string) (clusterID, memberID uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.hosts[hostPort]
	if !ok {
		return 0, 0, false
	}
	return e.c.id, e.id, true
}

// DeleteCluster forgets a cluster and all its members.
func (s *Sim) DeleteCluster(clusterID uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clusters[clusterID]
	if !ok {
		return
	}
	for _, m := range c.members {
		s.unroute(m)
	}
	delete(s.clusters, clusterID)
}

// Clusters is how many clusters the simulation holds.
func (s *Sim) Clusters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clusters)
}

func (s *Sim) route(c *cluster, m member) {
	for _, u := range append(append([]string(nil), m.peerURLs...), m.clientURLs...) {
		if h, err := hostPort(u); err == nil {
			s.hosts[h] = endpoint{c: c, id: m.id}
		}
	}
}

func (s *Sim) unroute(m member) {
	for _, u := range append(append([]string(nil), m.peerURLs...), m.clientURLs...) {
		if h, err := hostPort(u); err == nil {
			delete(s.hosts, h)
		}
	}
}

// hostPort is the part of a URL that gRPC puts in :authority.
func hostPort(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	if u.Host == "" {
		return "", fmt.Errorf("URL %q names no host", rawURL)
	}
	return u.Host, nil
}
