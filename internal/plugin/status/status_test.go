package status

import (
	"errors"
	"reflect"
	"strings"
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
			Status: corev1.PodStatus{PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "restore", RestartCount: 7}, {Name: "etcd", RestartCount: 2}}}},
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
		Leader: true, RaftTerm: 2, RaftIndex: 9, Alarms: []string{"NOSPACE"}, Pod: "db-1", Node: "n1", PodIP: "10.0.0.1", Restarts: 2, Ready: true}
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

// -o wide adds each Pod's IP and the etcd container's restarts; -o name lists the members.
func TestStatusPrintout(t *testing.T) {
	st := ClusterStatus{Cluster: "db", Members: []StatusRow{{Name: "db-1", PodIP: "10.0.0.1", Restarts: 2}, {Name: "db-2", Error: "no running Pod"}}}
	for output, want := range map[string][]string{
		"":     {"NAME", "db-1", "db-2", "error: no running Pod"},
		"wide": {"POD IP", "RESTARTS", "10.0.0.1", "2\n"},
		"name": {"etcdmember.etcd-operator.cozystack.io/db-1\netcdmember.etcd-operator.cozystack.io/db-2\n"},
	} {
		var out strings.Builder
		if err := (&cli.Options{Output: output, Out: &out}).Print(Printout(st)); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("-o %q lacks %q:\n%s", output, w, out.String())
			}
		}
		if output == "" && strings.Contains(out.String(), "POD IP") {
			t.Errorf("the default table has the wide columns:\n%s", out.String())
		}
	}
}
