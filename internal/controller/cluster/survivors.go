package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// What each member says about itself when the member list cannot be read: no quorum is
// needed to answer it, and it is what a quorum-loss recovery chooses its source from.

// survivor is what one member says about itself without a quorum.
type survivor struct {
	name     string
	answered bool
	status   etcd.Status
}

// askSurvivors asks every member that may run for its status, which each answers from its
// own state (no quorum needed): its revision, raft term and index, and whom it takes for
// the leader.
func askSurvivors(ctx context.Context, cli etcd.Client, c *etcdv1.EtcdCluster, v *clusterView) []survivor {
	names := knownMemberNames(c, v)
	out := make([]survivor, len(names))
	done := make(chan struct{}, len(names))
	for i, name := range names {
		go func() {
			defer func() { done <- struct{}{} }()
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			st, err := cli.Status(sctx, specs.ClientURL(c, name))
			out[i] = survivor{name: name, answered: err == nil, status: st}
		}()
	}
	for range names {
		<-done
	}
	return out
}

// quorumLostMessage says what each member still has, so that a person can see which one is
// the most advanced before deciding anything.
func quorumLostMessage(survivors []survivor) string {
	if len(survivors) == 0 {
		return "no member answers, and no member, PVC or Pod is known to ask"
	}
	parts := make([]string, 0, len(survivors))
	answered := 0
	for _, s := range survivors {
		if !s.answered {
			parts = append(parts, s.name+": not answering")
			continue
		}
		answered++
		role := "follower"
		switch {
		case s.status.IsLearner:
			role = "learner"
		case s.status.Leader == 0:
			role = "no leader"
		case s.status.Leader == s.status.MemberID:
			role = "leader"
		}
		parts = append(parts, fmt.Sprintf("%s (%s): revision %d, raft term %d, raft index %d, %s",
			s.name, etcd.FormatID(s.status.MemberID), s.status.Revision, s.status.RaftTerm, s.status.RaftIndex, role))
	}
	return fmt.Sprintf("the member list cannot be read (no quorum); %d of %d members answer: %s",
		answered, len(survivors), strings.Join(parts, "; "))
}
