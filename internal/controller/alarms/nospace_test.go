package alarms

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestDecide(t *testing.T) {
	withAlarm := func(reason string, policy etcdv1.NoSpacePolicy) *etcdv1.EtcdCluster {
		c := &etcdv1.EtcdCluster{}
		status := metav1.ConditionTrue
		if reason == etcdv1.ReasonNoAlarm {
			status = metav1.ConditionFalse
		}
		c.Status.Conditions = []metav1.Condition{{Type: etcdv1.ConditionAlarm, Status: status, Reason: reason}}
		if policy != "" {
			c.Spec.Alarms = &etcdv1.AlarmPolicy{NoSpace: policy}
		}
		return c
	}
	pass := func(phase etcdv1.EtcdDefragPhase) *etcdv1.EtcdDefrag {
		return &etcdv1.EtcdDefrag{Status: etcdv1.EtcdDefragStatus{Phase: phase}}
	}
	tests := []struct {
		name    string
		cluster *etcdv1.EtcdCluster
		pass    *etcdv1.EtcdDefrag
		old     bool
		want    step
	}{
		{"no alarm", withAlarm(etcdv1.ReasonNoAlarm, ""), nil, false, stepNone},
		{"NOSPACE: start", withAlarm(etcdv1.ReasonNoSpace, ""), nil, false, stepStart},
		{"NOSPACE, opted out", withAlarm(etcdv1.ReasonNoSpace, etcdv1.NoSpaceReport), nil, false, stepNone},
		{"CORRUPT is never remediated here", withAlarm(etcdv1.ReasonCorrupt, ""), nil, false, stepNone},
		{"the pass runs", withAlarm(etcdv1.ReasonNoSpace, ""), pass(etcdv1.EtcdDefragPhaseRunning), true, stepWait},
		{"the pass is done: disarm", withAlarm(etcdv1.ReasonNoSpace, ""), pass(etcdv1.EtcdDefragPhaseComplete), true, stepDisarm},
		{"the pass failed: disarm all the same (etcd raises it again if still full)", withAlarm(etcdv1.ReasonNoSpace, ""), pass(etcdv1.EtcdDefragPhaseFailed), true, stepDisarm},
		{"cleared: clean up", withAlarm(etcdv1.ReasonNoAlarm, ""), nil, true, stepCleanUp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decide(tt.cluster, tt.pass, tt.old); got != tt.want {
				t.Fatalf("decide = %d, want %d", got, tt.want)
			}
		})
	}
}
