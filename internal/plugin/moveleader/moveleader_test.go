package moveleader

import (
	"strings"
	"testing"

	"github.com/quorumkeeper/etcd-operator/internal/defragplan"
)

func TestForfeitTargetIsAnotherHealthyVoter(t *testing.T) {
	member := func(name string, id uint64, healthy, learner bool) defragplan.MemberView {
		return defragplan.MemberView{Name: name, ID: id, InEtcd: true, Answered: true, Healthy: healthy, Learner: learner}
	}
	view := func(leader uint64, ms ...defragplan.MemberView) defragplan.PassView {
		v := defragplan.PassView{Members: map[string]defragplan.MemberView{}, Leader: leader}
		for _, m := range ms {
			v.Members[m.Name] = m
			if m.Healthy && !m.Learner {
				v.HealthyVoterIDs = append(v.HealthyVoterIDs, m.ID)
			}
		}
		return v
	}
	for _, tc := range []struct {
		name     string
		view     defragplan.PassView
		from, to string
		refuse   string
	}{
		{"the first other voter by name", view(2, member("db-1", 1, true, false), member("db-2", 2, true, false), member("db-3", 3, true, false)), "db-2", "db-1", ""},
		{"not an unhealthy one", view(1, member("db-1", 1, true, false), member("db-2", 2, false, false), member("db-3", 3, true, false)), "db-1", "db-3", ""},
		{"not a learner", view(1, member("db-1", 1, true, false), member("db-2", 2, true, true), member("db-3", 3, true, false)), "db-1", "db-3", ""},
		{"nobody to take over", view(1, member("db-1", 1, true, false), member("db-2", 2, true, true)), "", "", "no other voter is healthy"},
		{"no leader known", view(0, member("db-1", 1, true, false), member("db-2", 2, true, false)), "", "", "no reachable member leads"},
	} {
		from, to, err := forfeitTarget(tc.view)
		if from != tc.from || to != tc.to || tc.refuse == "" && err != nil || tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)) {
			t.Errorf("%s: forfeitTarget = %q -> %q, %v; want %q -> %q, %q", tc.name, from, to, err, tc.from, tc.to, tc.refuse)
		}
	}
}
