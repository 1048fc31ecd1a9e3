package specs

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestRoleLabels(t *testing.T) {
	t.Parallel()
	base := MemberLabels("db", "db-1")
	with := func(v string) map[string]string {
		l := maps.Clone(base)
		l[etcdv1.LabelRole] = v
		return l
	}
	for _, tc := range []struct {
		name    string
		have    map[string]string
		role    etcdv1.MemberRole
		want    map[string]string
		changed bool
	}{
		{"a voter gets Cozystack's value", base, etcdv1.RoleVoter, with("voter"), true},
		{"a voter keeps it", with("voter"), etcdv1.RoleVoter, with("voter"), false},
		{"a voter of the old operator is relabelled", with("Voter"), etcdv1.RoleVoter, with("voter"), true},
		{"a learner carries none", base, etcdv1.RoleLearner, base, false},
		{"a learner of the old operator loses its label", with("Learner"), etcdv1.RoleLearner, base, true},
		{"an unknown role leaves an old label alone", with("Voter"), "", with("Voter"), false},
		{"an unknown role adds nothing", base, "", base, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.have)
			got, changed := RoleLabels(tc.have, tc.role)
			if !maps.Equal(got, tc.want) || changed != tc.changed {
				t.Errorf("RoleLabels(%v, %q) = %v, %v; want %v, %v", tc.have, tc.role, got, changed, tc.want, tc.changed)
			}
			if !maps.Equal(tc.have, before) {
				t.Errorf("RoleLabels changed its argument: %v", tc.have)
			}
		})
	}
}

func TestHasLegacyRoleLabel(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]bool{"Voter": true, "Learner": true, "voter": false, "": false} {
		l := MemberLabels("db", "db-1")
		if value != "" {
			l[etcdv1.LabelRole] = value
		}
		if got := HasLegacyRoleLabel(l); got != want {
			t.Errorf("role %q: legacy %v, want %v", value, got, want)
		}
	}
}

func selects(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(labels.Set(l))
}

// The PDB selects exactly the voters, by Cozystack's selector once no old value is left.
func TestPDBSelector(t *testing.T) {
	t.Parallel()
	pod := func(cluster, role string) map[string]string {
		l := MemberLabels(cluster, cluster+"-1")
		if role != "" {
			l[etcdv1.LabelRole] = role
		}
		return l
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		final  bool // selected by the selector of a cluster with no old value left
		moving bool // selected while old values are left
	}{
		{"voter", pod("db", "voter"), true, true},
		{"learner", pod("db", ""), false, false},
		{"old voter", pod("db", "Voter"), false, true},
		{"old learner", pod("db", "Learner"), false, false},
		{"another cluster's voter", pod("other", "voter"), false, false},
	} {
		if got := selects(t, PDBSelector("db", false), tc.labels); got != tc.final {
			t.Errorf("%s: selected by the final selector %v, want %v", tc.name, got, tc.final)
		}
		if got := selects(t, PDBSelector("db", true), tc.labels); got != tc.moving {
			t.Errorf("%s: selected while moving over %v, want %v", tc.name, got, tc.moving)
		}
	}
	// The final selector is Cozystack's own (its cluster label and role=voter), plus labels
	// every Pod of the cluster carries.
	final := PDBSelector("db", false)
	if final.MatchLabels[etcdv1.LabelCluster] != "db" || final.MatchLabels[etcdv1.LabelRole] != "voter" || len(final.MatchExpressions) != 0 {
		t.Errorf("final selector %+v is not Cozystack's", final)
	}
}

func TestRoleLabelWaits(t *testing.T) {
	t.Parallel()
	c := cluster()
	voter, _ := RoleLabels(MemberLabels("db", "db-1"), etcdv1.RoleVoter)
	learner, _ := RoleLabels(MemberLabels("db", "db-1"), etcdv1.RoleLearner)
	old := PDB(c, 3, false)
	old.Spec.Selector.MatchLabels[etcdv1.LabelRole] = etcdv1.LegacyRoleLabelVoter
	for _, tc := range []struct {
		name   string
		pdb    bool
		legacy bool
		oldPDB bool
		labels map[string]string
		want   bool
	}{
		{name: "no budget", labels: voter},
		{name: "the final budget", pdb: true, labels: voter},
		{name: "the widened budget", pdb: true, legacy: true, labels: voter},
		{name: "the old operator's budget", oldPDB: true, labels: voter, want: true},
		{name: "a learner never waits", oldPDB: true, labels: learner},
	} {
		var pdb = old
		switch {
		case tc.pdb:
			pdb = PDB(c, 3, tc.legacy)
		case !tc.oldPDB:
			pdb = nil
		}
		if got := RoleLabelWaits(pdb, tc.labels); got != tc.want {
			t.Errorf("%s: waits %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A cluster of the old operator moves over as the operator moves it: the budget widened, the
// Pods relabelled one by one (each only when RoleLabelWaits lets it), the budget narrowed once
// no old value is left. At every moment in between, the budget selects every voter and no
// learner, and minAvailable stays the quorum of the voters.
func TestRoleLabelsMoveOverWithEveryVoterSelected(t *testing.T) {
	t.Parallel()
	c := cluster()
	roles := map[string]etcdv1.MemberRole{"db-1": etcdv1.RoleVoter, "db-2": etcdv1.RoleVoter, "db-3": etcdv1.RoleVoter, "db-4": etcdv1.RoleLearner}
	pods := map[string]map[string]string{}
	for name, role := range roles {
		pods[name] = MemberLabels("db", name)
		pods[name][etcdv1.LabelRole] = string(role) // the old operator's value
	}
	pdb := PDB(c, 3, false)
	pdb.Spec.Selector.MatchLabels[etcdv1.LabelRole] = etcdv1.LegacyRoleLabelVoter // the old operator's budget
	check := func(when string) {
		t.Helper()
		for name, l := range pods {
			if got, want := selects(t, pdb.Spec.Selector, l), roles[name] == etcdv1.RoleVoter; got != want {
				t.Fatalf("%s: %s (%v) selected %v, want %v", when, name, l, got, want)
			}
		}
		if pdb.Spec.MinAvailable.IntValue() != 2 {
			t.Fatalf("%s: minAvailable %v", when, pdb.Spec.MinAvailable)
		}
	}
	legacy := func() bool {
		for _, l := range pods {
			if HasLegacyRoleLabel(l) {
				return true
			}
		}
		return false
	}
	relabel := func() {
		for _, name := range []string{"db-1", "db-2", "db-3", "db-4"} {
			want, changed := RoleLabels(pods[name], roles[name])
			if changed && !RoleLabelWaits(pdb, want) {
				pods[name] = want
				check("after relabelling " + name)
			}
		}
	}
	check("before")
	relabel() // the member controller may run first: the voters wait, the learner moves
	if !legacy() {
		t.Fatal("voters relabelled under the old operator's budget")
	}
	pdb = PDB(c, 3, legacy()) // the cluster controller widens
	check("widened")
	relabel()
	if legacy() {
		t.Fatalf("old values left under the widened budget: %v", pods)
	}
	pdb = PDB(c, 3, legacy()) // and narrows
	check("narrowed")
	if len(pdb.Spec.Selector.MatchExpressions) != 0 || pdb.Spec.Selector.MatchLabels[etcdv1.LabelRole] != etcdv1.RoleLabelVoter {
		t.Fatalf("the final selector is %+v", pdb.Spec.Selector)
	}
}
