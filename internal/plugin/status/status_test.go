package status

import (
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

func TestStatusRowsJoinTheOperatorsViewWithEtcdsAnswers(t *testing.T) {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"}}
	members := []etcdv1.EtcdMember{{ObjectMeta: metav1.ObjectMeta{Name: "db-2"}}, {ObjectMeta: metav1.ObjectMeta{Name: "db-1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "db-3"}}}
	members[2].Status.MemberID = "c"
	pods := map[string]corev1.Pod{
		"db-1": {ObjectMeta: metav1.ObjectMeta{Name: "db-1"}, Spec: corev1.PodSpec{NodeName: "n1"},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
		"db-2": {ObjectMeta: metav1.ObjectMeta{Name: "db-2"}, Spec: corev1.PodSpec{NodeName: "n2"}},
	}
	answers := map[string]cli.MemberStatus{
		"db-1": {Status: etcd.Status{MemberID: 0xa, Leader: 0xa, Version: "3.6.16", DBSize: 100, DBSizeInUse: 60, RaftTerm: 2, RaftIndex: 9}},
		"db-2": {Err: errors.New("deadline exceeded")},
	}
	rows := statusRows(c, members, pods, answers, []etcd.Alarm{{MemberID: 0xa, Type: etcd.AlarmNoSpace}, {MemberID: 0xb, Type: etcd.AlarmCorrupt}})
	if len(rows) != 3 || rows[0].Name != "db-1" || rows[2].Name != "db-3" {
		t.Fatalf("rows %+v", rows)
	}
	want := StatusRow{Name: "db-1", MemberID: "a", Endpoint: "http://db-1.db.prod.svc:2379", Version: "3.6.16", DBSize: 100, DBSizeInUse: 60,
		Leader: true, RaftTerm: 2, RaftIndex: 9, Alarms: []string{"NOSPACE"}, Pod: "db-1", Node: "n1", Ready: true}
	if !reflect.DeepEqual(rows[0], want) {
		t.Errorf("db-1\n got %+v\nwant %+v", rows[0], want)
	}
	if rows[1].Error != "deadline exceeded" || rows[1].Ready || rows[1].Node != "n2" {
		t.Errorf("db-2 (not answering) %+v", rows[1])
	}
	if rows[2].Error != "no running Pod" || rows[2].MemberID != "c" || rows[2].Pod != "" {
		t.Errorf("db-3 (no Pod) %+v", rows[2])
	}
}
