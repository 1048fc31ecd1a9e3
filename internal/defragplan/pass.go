package defragplan

import (
	"context"
	"fmt"
	"time"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// MemberView is what one look at etcd tells of one member.
type MemberView struct {
	Name     string
	ID       uint64
	Endpoint string
	InEtcd   bool
	Answered bool
	Healthy  bool
	Learner  bool
	Sizes    Sizes
}

// PassView is one look at the cluster: every member, the leader, and the voters' health.
type PassView struct {
	Members               map[string]MemberView
	Leader                uint64
	Voters, HealthyVoters int
	HealthyVoterIDs       []uint64
	// Quota is the backend quota the cluster gives its members (specs.QuotaBackendBytes),
	// which a member that reports none (0) runs with; 0 when not known: etcd's default.
	Quota int64
}

// Verdict is what the pass does with the member it reached.
type Verdict struct {
	Defragment bool
	MoveLeader bool // lead away first, then look again
	Outcome    etcdv1.DefragOutcome
	Reason     string
	Message    string
}

// Decide is the pure decision for one member: skip it (unhealthy, below the rule, or when
// pausing it would leave fewer healthy voters than a quorum), move leadership away from it,
// or defragment it.
func Decide(rule *etcdv1.DefragRule, v PassView, name string) Verdict {
	m, ok := v.Members[name]
	switch {
	case !ok || !m.InEtcd:
		return skip(etcdv1.ReasonMemberUnhealthy, "not in etcd's member list")
	case !m.Answered || !m.Healthy:
		return skip(etcdv1.ReasonMemberUnhealthy, "does not answer its health check")
	}
	pick, why := selected(rule, m.Sizes, v.Quota)
	if !pick {
		return skip(etcdv1.ReasonBelowThreshold, why)
	}
	if !m.Learner && v.HealthyVoters-1 < etcd.Quorum(v.Voters) {
		return skip(etcdv1.ReasonWouldLoseQuorum, fmt.Sprintf(
			"defragmenting pauses the member: %d of %d voters would stay healthy, fewer than the quorum of %d", v.HealthyVoters-1, v.Voters, etcd.Quorum(v.Voters)))
	}
	if m.ID == v.Leader {
		return Verdict{MoveLeader: true, Reason: etcdv1.ReasonRuleMatched, Message: why}
	}
	return Verdict{Defragment: true, Reason: etcdv1.ReasonRuleMatched, Message: why}
}

func skip(reason, message string) Verdict {
	return Verdict{Outcome: etcdv1.DefragOutcomeSkipped, Reason: reason, Message: message}
}

// NextMember is the first member without an outcome, followers before the leader.
func NextMember(rows []etcdv1.MemberDefragStatus, v PassView) (string, bool) {
	var leader string
	for _, row := range rows {
		if row.Outcome != etcdv1.DefragOutcomePending && row.Outcome != "" {
			continue
		}
		if m, ok := v.Members[row.Name]; ok && m.ID == v.Leader && v.Leader != 0 {
			leader = row.Name
			continue
		}
		return row.Name, true
	}
	return leader, leader != ""
}

// Look asks etcd for the member list, then every member for its status and health.
func Look(ctx context.Context, cli etcd.Client, names []string, endpointOf func(string) string) (PassView, error) {
	listCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, list, err := cli.MemberList(listCtx)
	if err != nil {
		return PassView{}, err
	}
	v := PassView{Members: map[string]MemberView{}}
	for _, name := range names {
		m := MemberView{Name: name, Endpoint: endpointOf(name)}
		for _, em := range list {
			if em.Name == name {
				m.ID, m.InEtcd, m.Learner = em.ID, true, em.IsLearner
			}
		}
		if m.InEtcd {
			observe(ctx, cli, &m, &v)
		}
		v.Members[name] = m
	}
	for _, em := range list {
		if !em.IsLearner {
			v.Voters++
		}
	}
	return v, nil
}

func observe(ctx context.Context, cli etcd.Client, m *MemberView, v *PassView) {
	checkCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := cli.Status(checkCtx, m.Endpoint)
	if err != nil {
		return
	}
	m.Answered = true
	m.Sizes = Sizes{DBSize: st.DBSize, InUse: st.DBSizeInUse, Quota: st.DBSizeQuota}
	if st.Leader != 0 {
		v.Leader = st.Leader
	}
	m.Healthy = m.Learner || cli.Healthy(checkCtx, m.Endpoint) == nil
	if m.Healthy && !m.Learner {
		v.HealthyVoters++
		v.HealthyVoterIDs = append(v.HealthyVoterIDs, m.ID)
	}
}
