package defrag

import (
	"context"
	"fmt"
	"time"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// memberView is what one look at etcd tells of one member.
type memberView struct {
	name     string
	id       uint64
	endpoint string
	inEtcd   bool
	answered bool
	healthy  bool
	learner  bool
	sizes    sizes
}

// passView is one look at the cluster: every member, the leader, and the voters' health.
type passView struct {
	members               map[string]memberView
	leader                uint64
	voters, healthyVoters int
	healthyVoterIDs       []uint64
}

func quorum(voters int) int { return voters/2 + 1 }

// verdict is what the pass does with the member it reached.
type verdict struct {
	defragment bool
	moveLeader bool // lead away first, then look again
	outcome    etcdv1.DefragOutcome
	reason     string
	message    string
}

// decide is the pure decision for one member: skip it (unhealthy, below the rule, or when
// pausing it would leave fewer healthy voters than a quorum), move leadership away from it,
// or defragment it.
func decide(rule *etcdv1.DefragRule, v passView, name string) verdict {
	m, ok := v.members[name]
	switch {
	case !ok || !m.inEtcd:
		return skip(etcdv1.ReasonMemberUnhealthy, "not in etcd's member list")
	case !m.answered || !m.healthy:
		return skip(etcdv1.ReasonMemberUnhealthy, "does not answer its health check")
	}
	pick, why := selected(rule, m.sizes)
	if !pick {
		return skip(etcdv1.ReasonBelowThreshold, why)
	}
	if !m.learner && v.healthyVoters-1 < quorum(v.voters) {
		return skip(etcdv1.ReasonWouldLoseQuorum, fmt.Sprintf(
			"defragmenting pauses the member: %d of %d voters would stay healthy, fewer than the quorum of %d", v.healthyVoters-1, v.voters, quorum(v.voters)))
	}
	if m.id == v.leader {
		return verdict{moveLeader: true, reason: etcdv1.ReasonRuleMatched, message: why}
	}
	return verdict{defragment: true, reason: etcdv1.ReasonRuleMatched, message: why}
}

func skip(reason, message string) verdict {
	return verdict{outcome: etcdv1.DefragOutcomeSkipped, reason: reason, message: message}
}

// nextMember is the first member without an outcome, followers before the leader.
func nextMember(rows []etcdv1.MemberDefragStatus, v passView) (string, bool) {
	var leader string
	for _, row := range rows {
		if row.Outcome != etcdv1.DefragOutcomePending && row.Outcome != "" {
			continue
		}
		if m, ok := v.members[row.Name]; ok && m.id == v.leader && v.leader != 0 {
			leader = row.Name
			continue
		}
		return row.Name, true
	}
	return leader, leader != ""
}

// look asks etcd for the member list, then every member for its status and health.
func look(ctx context.Context, cli etcd.Client, names []string, endpointOf func(string) string) (passView, error) {
	listCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, list, err := cli.MemberList(listCtx)
	if err != nil {
		return passView{}, err
	}
	v := passView{members: map[string]memberView{}}
	for _, name := range names {
		m := memberView{name: name, endpoint: endpointOf(name)}
		for _, em := range list {
			if em.Name == name {
				m.id, m.inEtcd, m.learner = em.ID, true, em.IsLearner
			}
		}
		if m.inEtcd {
			observe(ctx, cli, &m, &v)
		}
		v.members[name] = m
	}
	for _, em := range list {
		if !em.IsLearner {
			v.voters++
		}
	}
	return v, nil
}

func observe(ctx context.Context, cli etcd.Client, m *memberView, v *passView) {
	checkCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := cli.Status(checkCtx, m.endpoint)
	if err != nil {
		return
	}
	m.answered = true
	m.sizes = sizes{dbSize: st.DBSize, inUse: st.DBSizeInUse, quota: st.DBSizeQuota}
	if st.Leader != 0 {
		v.leader = st.Leader
	}
	m.healthy = m.learner || cli.Healthy(checkCtx, m.endpoint) == nil
	if m.healthy && !m.learner {
		v.healthyVoters++
		v.healthyVoterIDs = append(v.healthyVoterIDs, m.id)
	}
}
