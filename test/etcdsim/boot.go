package etcdsim

import (
	"crypto/sha1" //nolint:gosec // etcd derives its IDs with SHA-1; the simulator must match them
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Boot is what an etcd process is started with.
type Boot struct {
	Member
	// InitialCluster is --initial-cluster: names and peer URLs of the members a new cluster
	// starts with. Only read when New.
	InitialCluster []Member
	Token          string // --initial-cluster-token
	New            bool   // --initial-cluster-state=new
}

// StartProcess is an etcd process starting: a member that ran before, or was added, is found
// by its peer URL; otherwise a new cluster is created from b.InitialCluster. The member then
// publishes its name and client URLs and answers calls. It returns the member's IDs.
func (s *Sim) StartProcess(b Boot) (clusterID, memberID uint64, err error) {
	if len(b.PeerURLs) == 0 {
		return 0, 0, errors.New("etcdsim: a member needs a peer URL")
	}
	peer, err := hostPort(b.PeerURLs[0])
	if err != nil {
		return 0, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, found := s.hosts[peer]
	if !found && b.New {
		if err := s.create(b.Token, b.InitialCluster); err != nil {
			return 0, 0, err
		}
		e, found = s.hosts[peer]
	}
	if !found {
		// etcd refuses to start too: a joining member must have been added first.
		return 0, 0, fmt.Errorf("etcdsim: no cluster has a member with peer URL %s", b.PeerURLs[0])
	}
	s.start(e.c, e.id, b.Name, b.ClientURLs)
	return e.c.id, e.id, nil
}

// StopProcess is a member's etcd process ending: it stays a member but answers nothing, and
// a new leader is elected if it led.
func (s *Sim) StopProcess(peerURL string) {
	h, err := hostPort(peerURL)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.hosts[h]
	if !ok {
		return
	}
	if i := e.c.find(e.id); i >= 0 {
		e.c.members[i].running = false
		e.c.elect()
	}
}

// create makes a new cluster of voters with etcd's IDs; nobody runs yet.
func (s *Sim) create(token string, initial []Member) error {
	if len(initial) == 0 {
		return errors.New("etcdsim: a new cluster needs its initial members")
	}
	c := &cluster{
		revision: 1, dbSize: freshDBSize, dbInUse: freshDBSizeInUse,
		// Each initial member's ConfChange is a raft entry.
		index: uint64(len(initial)),
	}
	for _, m := range initial {
		// etcd knows an initial member's name from --initial-cluster before it starts.
		c.members = append(c.members, member{id: memberID(m.PeerURLs, token), name: m.Name, peerURLs: slices.Clone(m.PeerURLs)})
	}
	c.sort()
	c.id = clusterID(c.members)
	if _, ok := s.clusters[c.id]; ok {
		return fmt.Errorf("etcdsim: cluster %x exists already", c.id)
	}
	s.clusters[c.id] = c
	for _, m := range c.members {
		s.route(c, m)
	}
	return nil
}

// start marks a member's process running with the name and client URLs it publishes.
func (s *Sim) start(c *cluster, id uint64, name string, clientURLs []string) {
	i := c.find(id)
	s.unroute(c.members[i])
	m := &c.members[i]
	m.name, m.clientURLs, m.running = name, slices.Clone(clientURLs), true
	s.route(c, *m)
	c.index++ // publishing the attributes is a raft entry
	c.elect()
}

// memberID is etcd's ID of a member added at bootstrap: the first 8 bytes of the SHA-1 of
// its sorted peer URLs and the cluster token.
func memberID(peerURLs []string, token string) uint64 {
	sorted := slices.Sorted(slices.Values(peerURLs))
	sum := sha1.Sum([]byte(strings.Join(sorted, "") + token)) //nolint:gosec // etcd's ID scheme
	return binary.BigEndian.Uint64(sum[:8])
}

// clusterID is etcd's cluster ID: the SHA-1 of the members' IDs in order.
func clusterID(members []member) uint64 {
	b := make([]byte, 0, 8*len(members))
	for _, m := range members {
		b = binary.BigEndian.AppendUint64(b, m.id)
	}
	sum := sha1.Sum(b) //nolint:gosec // etcd's ID scheme
	return binary.BigEndian.Uint64(sum[:8])
}

// ParseArgs reads a Boot from an etcd member's flags, as specs.EtcdArgs writes them;
// initialCluster is --initial-cluster ("name=peerURL,..."), which the operator passes in an
// environment variable rather than a flag.
func ParseArgs(args []string, initialCluster string) (Boot, error) {
	var b Boot
	for _, arg := range args {
		flag, value, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		switch flag {
		case "name":
			b.Name = value
		case "initial-advertise-peer-urls":
			b.PeerURLs = strings.Split(value, ",")
		case "advertise-client-urls":
			b.ClientURLs = strings.Split(value, ",")
		case "initial-cluster-token":
			b.Token = value
		case "initial-cluster-state":
			b.New = value == "new"
		case "initial-cluster":
			initialCluster = value
		}
	}
	var err error
	b.InitialCluster, err = parseInitialCluster(initialCluster)
	if b.Name == "" || len(b.PeerURLs) == 0 {
		err = errors.Join(err, fmt.Errorf("etcdsim: flags %q name no member and peer URL", args))
	}
	return b, err
}

// parseInitialCluster reads "name=url,name=url"; a name may repeat, once for each URL.
func parseInitialCluster(v string) ([]Member, error) {
	var out []Member
	for part := range strings.SplitSeq(v, ",") {
		if part == "" {
			continue
		}
		name, u, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("etcdsim: initial cluster entry %q is not name=URL", part)
		}
		i := slices.IndexFunc(out, func(m Member) bool { return m.Name == name })
		if i < 0 {
			out = append(out, Member{Name: name})
			i = len(out) - 1
		}
		out[i].PeerURLs = append(out[i].PeerURLs, u)
	}
	return out, nil
}
