package kit

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/quorumkeeper/etcd-operator/internal/controller/kit/kittest"
)

func TestAStepSaysWhetherItWasTakenWaitsOrFailed(t *testing.T) {
	wait := Waiting{Reason: "NoRunningMember", Message: "the cluster has no running member"}
	for _, tc := range []struct {
		step    Step
		err     error
		msg     string
		changed bool
		extra   string
	}{
		{Step{Name: "start", Changed: true}, nil, "step taken", true, ""},
		{Step{Name: "wait", Changed: true, Why: wait}, nil, "step waits", true, "waitReason"},
		{Step{Name: "wait", Changed: true, Why: wait}, errors.New("conflict"), "step failed", true, "error"},
		{Step{Name: "write", Why: wait}, errors.New("conflict"), "step failed", false, "error"},
		{Step{}, nil, "no step applies", false, ""},
	} {
		logged := kittest.NewLog(t, "etcddefrag", "EtcdDefrag", types.NamespacedName{Namespace: "ns", Name: "pass"})
		tc.step.Facts = []any{"member", "db-2"}
		tc.step.Log(logged.Context(), tc.err)
		line := logged.Step()
		if line["msg"] != tc.msg || line["changed"] != tc.changed || line["member"] != "db-2" || (tc.extra != "" && line[tc.extra] == nil) {
			t.Errorf("%+v with %v: want %q, changed %v, the facts and %q: %v", tc.step, tc.err, tc.msg, tc.changed, tc.extra, line)
		}
	}
}
