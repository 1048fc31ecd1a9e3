package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// The components learn whether a Pod of the cluster still carries an old role value: the
// PodDisruptionBudget selects both voter values until none does.
func TestChildFactsSayWhetherOldRoleLabelsAreLeft(t *testing.T) {
	t.Parallel()
	pod := func(name, role string) *corev1.Pod {
		l := specs.MemberLabels("db", name)
		if role != "" {
			l[etcdv1.LabelRole] = role
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want bool
	}{
		{"none", nil, false},
		{"all moved over", []*corev1.Pod{pod("db-1", "voter"), pod("db-2", "")}, false},
		{"an old voter left", []*corev1.Pod{pod("db-1", "voter"), pod("db-2", "Voter")}, true},
		{"an old learner left", []*corev1.Pod{pod("db-1", "voter"), pod("db-2", "Learner")}, true},
	} {
		v := &clusterView{pods: map[string]*corev1.Pod{}}
		for _, p := range tc.pods {
			v.pods[p.Name] = p
		}
		if got := v.childFacts().LegacyRoleLabels; got != tc.want {
			t.Errorf("%s: LegacyRoleLabels %v, want %v", tc.name, got, tc.want)
		}
	}
}
