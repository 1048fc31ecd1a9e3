package etcdfake

import (
	"fmt"
	"slices"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// The helpers below expect f.mu to be held.

func (f *Cluster) newMember(peerURLs []string, learner bool) *memberState {
	m := &memberState{
		Member:      etcd.Member{ID: f.nextID, PeerURLs: slices.Clone(peerURLs), IsLearner: learner},
		dbSize:      DefaultDBSize,
		dbSizeInUse: DefaultDBSizeInUse,
	}
	f.nextID++
	f.members = append(f.members, m)
	return m
}

func (f *Cluster) find(id uint64) *memberState {
	for _, m := range f.members {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// mustFind is for the test-facing setters, where an unknown ID is a bug in
// the test rather than a case to model.
func (f *Cluster) mustFind(id uint64) *memberState {
	m := f.find(id)
	if m == nil {
		panic(fmt.Sprintf("etcdfake: no member %x", id))
	}
	return m
}

func (f *Cluster) memberList() []etcd.Member {
	out := make([]etcd.Member, 0, len(f.members))
	for _, m := range f.members {
		out = append(out, copyMember(m.Member))
	}
	return out
}

// serving returns the member behind a client endpoint if its process is up.
func (f *Cluster) serving(endpoint string) (*memberState, error) {
	for _, m := range f.members {
		if slices.Contains(m.ClientURLs, endpoint) {
			if m.down {
				return nil, fmt.Errorf("%s (member %x is down): %w", endpoint, m.ID, ErrUnreachable)
			}
			return m, nil
		}
	}
	return nil, fmt.Errorf("%s (no member): %w", endpoint, ErrUnreachable)
}

// electIfNeeded keeps a healthy leader, or picks the first voter that is up
// while a quorum of voters is up, or leaves the cluster leaderless.
func (f *Cluster) electIfNeeded() {
	voters, up := 0, 0
	var firstUp uint64
	leaderOK := false
	for _, m := range f.members {
		if m.IsLearner {
			continue
		}
		voters++
		if m.down {
			continue
		}
		up++
		if firstUp == 0 {
			firstUp = m.ID
		}
		leaderOK = leaderOK || m.ID == f.leader
	}
	switch {
	case up <= voters/2:
		f.leader = 0
	case !leaderOK:
		f.leader = firstUp
	}
}

func copyMember(m etcd.Member) etcd.Member {
	m.PeerURLs = slices.Clone(m.PeerURLs)
	m.ClientURLs = slices.Clone(m.ClientURLs)
	return m
}
