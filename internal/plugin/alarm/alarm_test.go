package alarm

import (
	"reflect"
	"strings"
	"testing"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// Each alarm names its member as etcd lists it; -o name lists each member with an alarm once.
func TestAlarmRowsNameTheirMembers(t *testing.T) {
	alarms := []etcd.Alarm{{MemberID: 0xa, Type: etcd.AlarmNoSpace}, {MemberID: 0xa, Type: etcd.AlarmCorrupt}, {MemberID: 0xf, Type: etcd.AlarmNoSpace}}
	rows := alarmRows(alarms, []etcd.Member{{ID: 0xa, Name: "db-1"}, {ID: 0xb, Name: "db-2"}})
	want := []AlarmRow{{MemberID: "a", Member: "db-1", Alarm: "NOSPACE"}, {MemberID: "a", Member: "db-1", Alarm: "CORRUPT"}, {MemberID: "f", Alarm: "NOSPACE"}}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("rows %+v\nwant %+v", rows, want)
	}
	var out strings.Builder
	if err := (&cli.Options{Output: "name", Out: &out}).Print(alarmPrintout(rows)); err != nil || out.String() != "etcdmember.etcd-operator.cozystack.io/db-1\n" {
		t.Errorf("-o name printed %q, %v", out.String(), err)
	}
}
