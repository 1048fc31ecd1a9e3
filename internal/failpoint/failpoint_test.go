package failpoint

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func clusterWith(annotation string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: "c", Namespace: "ns", Annotations: map[string]string{etcdv1.AnnotationCrashAfter: annotation}}
}

func TestCrashExitsOnlyWhenEnabledAndArmed(t *testing.T) {
	var code int
	exit = func(c int) { code = c }
	t.Cleanup(func() { exit, enabled = nil, false })

	cases := []struct {
		enabled    bool
		annotation string
		want       int
	}{
		{false, AfterAddLearner, 0},
		{true, "", 0},
		{true, AfterPromote, 0},
		{true, AfterAddLearner, ExitCode},
		{true, "promote, add-learner", ExitCode},
	}
	for _, tc := range cases {
		code, enabled = 0, tc.enabled
		Crash(clusterWith(tc.annotation), AfterAddLearner)
		if code != tc.want {
			t.Errorf("enabled=%v annotation=%q: exit code %d, want %d", tc.enabled, tc.annotation, code, tc.want)
		}
	}
}
