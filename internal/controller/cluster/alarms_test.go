package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/childtest"
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
		{"none", nil, metav1.ConditionFalse, etcdv1.ReasonNoAlarm, []string{"no alarm"}},
		{"NOSPACE", []etcd.Alarm{{MemberID: 2, Type: etcd.AlarmNoSpace}, {MemberID: 1, Type: etcd.AlarmNoSpace}}, metav1.ConditionTrue, etcdv1.ReasonNoSpace,
			[]string{"NOSPACE raised by db-1, db-2", "spec.alarms.noSpace"}},
		{"CORRUPT wins", []etcd.Alarm{{MemberID: 1, Type: etcd.AlarmNoSpace}, {MemberID: 3, Type: etcd.AlarmCorrupt}}, metav1.ConditionTrue, etcdv1.ReasonCorrupt,
			[]string{"CORRUPT raised by db-3", "NOSPACE raised by db-1", "never disarms CORRUPT"}},
		{"a member etcd no longer lists", []etcd.Alarm{{MemberID: 0xab, Type: etcd.AlarmNoSpace}}, metav1.ConditionTrue, etcdv1.ReasonNoSpace, []string{"raised by ab"}},
		{"no member named (ID 0)", []etcd.Alarm{{MemberID: 0, Type: etcd.AlarmCorrupt}}, metav1.ConditionTrue, etcdv1.ReasonCorrupt,
			[]string{"CORRUPT raised by the whole cluster (etcd could not tell which member)"}},
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
	if cond := h.condition(etcdv1.ConditionAlarm); cond.Reason != etcdv1.ReasonNoSpace || !strings.Contains(cond.Message, "NOSPACE raised by db-2") {
		t.Fatalf("Alarm condition %+v", cond)
	}
}

func TestStaleAlarmsAreThoseOfMembersEtcdNoLongerLists(t *testing.T) {
	members := []etcd.Member{{ID: 1, Name: "db-1"}, {ID: 2, Name: "db-2"}, {ID: 3}} // 3: a learner not started yet
	tests := []struct {
		name   string
		alarms []etcd.Alarm
		want   []etcd.Alarm
	}{
		{"none", nil, nil},
		{"a listed member's CORRUPT stays", []etcd.Alarm{{MemberID: 2, Type: etcd.AlarmCorrupt}}, nil},
		{"an unstarted member is listed too", []etcd.Alarm{{MemberID: 3, Type: etcd.AlarmNoSpace}}, nil},
		{"a removed member's alarms go", []etcd.Alarm{{MemberID: 2, Type: etcd.AlarmCorrupt}, {MemberID: 9, Type: etcd.AlarmCorrupt}, {MemberID: 9, Type: etcd.AlarmNoSpace}},
			[]etcd.Alarm{{MemberID: 9, Type: etcd.AlarmCorrupt}, {MemberID: 9, Type: etcd.AlarmNoSpace}}},
		{"ID 0 (etcd could not tell which member) stays", []etcd.Alarm{{MemberID: 0, Type: etcd.AlarmCorrupt}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := staleAlarms(tt.alarms, members); !slices.Equal(got, tt.want) {
				t.Fatalf("staleAlarms = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A member with a CORRUPT alarm keeps it, and the condition says so, as long as etcd lists the
// member, also while its replacement is refused; once the member is out of etcd (what its
// EtcdMember's finalizer does after the replacement marked it), the alarm, which etcd keeps
// and which refuses every write, is disarmed, and the condition clears.
func TestCorruptAlarmIsDisarmedOnlyOnceTheMemberIsGone(t *testing.T) {
	h := runningHarness(t)
	recorder := events.NewFakeRecorder(50)
	h.r.Recorder = recorder
	corrupt := etcd.Alarm{MemberID: h.etcdID("db-3"), Type: etcd.AlarmCorrupt}
	h.etcd.RaiseAlarm(corrupt)
	h.etcd.SetDown(h.etcdID("db-1"), true) // the quorum cannot lose db-3 now
	for range 3 {
		h.reconcile()
	}
	if alarms, _ := h.etcd.Alarms(context.Background()); !slices.Equal(alarms, []etcd.Alarm{corrupt}) {
		t.Fatalf("alarms %+v while db-3 remains, want its CORRUPT", alarms)
	}
	if cond := h.condition(etcdv1.ConditionAlarm); cond.Reason != etcdv1.ReasonCorrupt || !strings.Contains(cond.Message, "CORRUPT raised by db-3") {
		t.Fatalf("Alarm condition %+v", cond)
	}
	if pr := h.condition(etcdv1.ConditionProgressing); pr.Reason != etcdv1.ReasonReplacementRefused {
		t.Fatalf("Progressing %+v, want the replacement refused", pr)
	}
	h.etcd.SetDown(h.etcdID("db-1"), false)
	h.reconcile()
	if slices.Contains(names(h.members()), "db-3") {
		t.Fatalf("db-3 not replaced: %v", names(h.members()))
	}
	if alarms, _ := h.etcd.Alarms(context.Background()); len(alarms) != 1 {
		t.Fatalf("alarms %+v: disarmed while etcd still lists db-3", alarms)
	}
	if err := h.etcd.Remove(context.Background(), corrupt.MemberID); err != nil {
		t.Fatal(err)
	}
	childtest.Events(recorder)
	h.reconcile()
	if alarms, _ := h.etcd.Alarms(context.Background()); len(alarms) != 0 {
		t.Fatalf("alarms %+v after db-3 left etcd, want none", alarms)
	}
	if cond := h.condition(etcdv1.ConditionAlarm); cond.Status != metav1.ConditionFalse || cond.Reason != etcdv1.ReasonNoAlarm {
		t.Fatalf("Alarm condition %+v after the disarm", cond)
	}
	got := strings.Join(childtest.Events(recorder), "\n")
	for _, want := range []string{etcdv1.ReasonRemovedMemberAlarmDisarmed, "AlarmCleared"} {
		if !strings.Contains(got, want) {
			t.Errorf("events %q, want %s", got, want)
		}
	}
}
