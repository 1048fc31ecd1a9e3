package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

func TestAlarmConditionNamesTheMembers(t *testing.T) {
	v := &clusterView{etcdMembers: []etcd.Member{{ID: 1, Name: "db-1"}, {ID: 2, Name: "db-2"}, {ID: 3, Name: "db-3"}}}
	tests := []struct {
		name   string
		alarms []etcd.Alarm
		status metav1.ConditionStatus
		reason string
		says   []string
	}{
		{"none", nil, metav1.ConditionFalse, ReasonNoAlarm, []string{"no alarm"}},
		{"NOSPACE", []etcd.Alarm{{MemberID: 2, Type: etcd.AlarmNoSpace}, {MemberID: 1, Type: etcd.AlarmNoSpace}}, metav1.ConditionTrue, ReasonNoSpace,
			[]string{"NOSPACE raised by db-1, db-2", "spec.alarms.noSpace"}},
		{"CORRUPT wins", []etcd.Alarm{{MemberID: 1, Type: etcd.AlarmNoSpace}, {MemberID: 3, Type: etcd.AlarmCorrupt}}, metav1.ConditionTrue, ReasonCorrupt,
			[]string{"CORRUPT raised by db-3", "NOSPACE raised by db-1", "never disarms CORRUPT"}},
		{"a member etcd no longer lists", []etcd.Alarm{{MemberID: 0xab, Type: etcd.AlarmNoSpace}}, metav1.ConditionTrue, ReasonNoSpace, []string{"raised by ab"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := alarmCondition(v, tt.alarms)
			if got.Status != tt.status || got.Reason != tt.reason {
				t.Fatalf("condition %+v, want %s/%s", got, tt.status, tt.reason)
			}
			for _, s := range tt.says {
				if !strings.Contains(got.Message, s) {
					t.Errorf("message %q does not say %q", got.Message, s)
				}
			}
		})
	}
}

// One reconcile lists etcd's alarms once: the replacement of a corrupt member and the Alarm
// condition read the same list.
func TestAlarmsAreListedOncePerReconcile(t *testing.T) {
	h := runningHarness(t)
	h.etcd.RaiseAlarm(etcd.Alarm{MemberID: h.etcdID("db-2"), Type: etcd.AlarmNoSpace})
	h.etcd.ResetCalls()
	h.reconcile()
	if got := h.etcd.CallsTo("Alarms"); len(got) != 1 {
		t.Fatalf("Alarms called %d times in one reconcile, want 1", len(got))
	}
	if cond := h.condition(etcdv1.ConditionAlarm); cond.Reason != ReasonNoSpace || !strings.Contains(cond.Message, "NOSPACE raised by db-2") {
		t.Fatalf("Alarm condition %+v", cond)
	}
}
