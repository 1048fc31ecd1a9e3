package recovercmd

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

func TestRecoverOnlyAClusterThatLostItsQuorum(t *testing.T) {
	for name, tt := range map[string]struct {
		available *metav1.Condition
		refused   string
	}{
		"not looked at yet": {nil, "no Available condition"},
		"healthy":           {&metav1.Condition{Status: metav1.ConditionTrue, Reason: "Healthy"}, "has not lost its quorum"},
		"one member down":   {&metav1.Condition{Status: metav1.ConditionTrue, Reason: "Degraded"}, "replace-member"},
		"quorum lost":       {&metav1.Condition{Status: metav1.ConditionFalse, Reason: etcdv1.ReasonQuorumLost}, ""},
	} {
		err := checkRecover(tt.available)
		if tt.refused == "" && err != nil || tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)) {
			t.Errorf("%s: %v, want a refusal saying %q", name, err, tt.refused)
		}
	}
}

func TestRecoveryAnswerIsTheOperatorsAboutThisSource(t *testing.T) {
	requested := map[string]string{etcdv1.AnnotationRecoverFrom: "db-1"}
	progressing := func(reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: etcdv1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: reason, Message: msg}}
	}
	for name, tt := range map[string]struct {
		annotations map[string]string
		conditions  []metav1.Condition
		done        bool
		refused     bool
	}{
		"not taken up yet":          {requested, nil, false, false},
		"still the old wait":        {requested, progressing(etcdv1.ReasonQuorumLost, "1 of 3 members answer"), false, false},
		"loss stated for db-1":      {requested, progressing(etcdv1.ReasonQuorumRecovery, "recovering from member db-1 at revision 7 (raft term 2, applied index 9): ..."), true, false},
		"loss stated for db-10":     {requested, progressing(etcdv1.ReasonQuorumRecovery, "recovering from member db-10 at revision 7"), false, false},
		"refused for db-1":          {requested, progressing(etcdv1.ReasonRecoveryRefused, "the quorum is lost and "+etcdv1.AnnotationRecoverFrom+"=db-1 asks for a recovery, but: member db-1 does not answer"), true, true},
		"an earlier refusal (db-2)": {requested, progressing(etcdv1.ReasonRecoveryRefused, "the quorum is lost and "+etcdv1.AnnotationRecoverFrom+"=db-2 asks for a recovery, but: member db-2 does not answer"), false, false},
		"finished":                  {nil, nil, true, false},
	} {
		c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations}, Status: etcdv1.EtcdClusterStatus{Conditions: tt.conditions}}
		answer, done, refusal := recoveryAnswer(c, memberRequest("db-1"))
		if done != tt.done || (refusal != nil) != tt.refused || done && !tt.refused && answer == "" {
			t.Errorf("%s: answer %q, done %v, refusal %v; want done %v, refused %v", name, answer, done, refusal, tt.done, tt.refused)
		}
	}
}

func recoverFixture(t *testing.T) *cli.Kube {
	t.Helper()
	scheme, err := cli.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	objs := []client.Object{c}
	for _, name := range []string{"db-1", "db-2"} {
		objs = append(objs, &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{etcdv1.LabelCluster: "db"}}})
	}
	return &cli.Kube{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build(), Namespace: "ns"}
}

// The request names an existing member and lands as the operator's annotation; with no
// operator to answer, the wait ends with a message that the request stays.
func TestRecoverRequestsThroughTheOperatorsAnnotation(t *testing.T) {
	ctx := context.Background()
	k := recoverFixture(t)
	c, err := k.Cluster(ctx, "db")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkMember(ctx, k, c, "db-9"); err == nil || !strings.Contains(err.Error(), "[db-1 db-2]") {
		t.Fatalf("an unknown member: %v, want the member names", err)
	}
	if err := checkMember(ctx, k, c, "db-2"); err != nil {
		t.Fatal(err)
	}
	if err := requestRecovery(ctx, k, c, memberRequest("db-2")); err != nil {
		t.Fatal(err)
	}
	if c, _ = k.Cluster(ctx, "db"); c.Annotations[etcdv1.AnnotationRecoverFrom] != "db-2" {
		t.Fatalf("annotations %v", c.Annotations)
	}
	if _, err := awaitRecoveryAnswer(ctx, k, "db", memberRequest("db-2"), 1500*time.Millisecond); err == nil || !strings.Contains(err.Error(), "the request stays") {
		t.Fatalf("no operator answering: %v", err)
	}
}

// --from-snapshot names an EtcdSnapshot that exists and is Complete, and lands as the
// operator's recover-from-snapshot annotation, whose answer is read as for a member.
func TestRecoverFromSnapshotRequest(t *testing.T) {
	ctx := context.Background()
	k := recoverFixture(t)
	for _, s := range []*etcdv1.EtcdSnapshot{
		{ObjectMeta: metav1.ObjectMeta{Name: "done", Namespace: "ns"}, Status: etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotComplete}},
		{ObjectMeta: metav1.ObjectMeta{Name: "failed", Namespace: "ns"}, Status: etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotFailed}},
	} {
		if err := k.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := k.Cluster(ctx, "db")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"nope": `there is no EtcdSnapshot "nope"`, "failed": `EtcdSnapshot failed is "Failed", not Complete`} {
		if err := checkSnapshot(ctx, k, c, name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
	if err := checkSnapshot(ctx, k, c, "done"); err != nil {
		t.Fatal(err)
	}
	req := snapshotRequest("done")
	if err := requestRecovery(ctx, k, c, req); err != nil {
		t.Fatal(err)
	}
	if c, _ = k.Cluster(ctx, "db"); c.Annotations[etcdv1.AnnotationRecoverFromSnapshot] != "done" {
		t.Fatalf("annotations %v", c.Annotations)
	}
	c.Status.Conditions = []metav1.Condition{{Type: etcdv1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: etcdv1.ReasonQuorumRecovery,
		Message: "restoring EtcdSnapshot done at revision 40 (taken from member db-1 of etcd cluster c1): writes after revision 40 are lost"}}
	if answer, done, refusal := recoveryAnswer(c, req); !done || refusal != nil || !strings.Contains(answer, "writes after revision 40 are lost") {
		t.Errorf("stated: %q %v %v", answer, done, refusal)
	}
	c.Status.Conditions[0].Reason = etcdv1.ReasonRecoveryRefused
	c.Status.Conditions[0].Message = "the quorum is lost and " + etcdv1.AnnotationRecoverFromSnapshot + "=done asks for a recovery, but: EtcdSnapshot done holds the data of EtcdCluster x"
	if _, done, refusal := recoveryAnswer(c, req); !done || refusal == nil {
		t.Errorf("refused: done %v, refusal %v", done, refusal)
	}
}

// A request whose cluster the operator changed since it was read (its status, written on its
// own) is made again at the new version, after the quorum loss is checked again: refused if
// the quorum is back.
func TestRecoverRequestAfterTheClusterChanged(t *testing.T) {
	ctx := context.Background()
	for name, tt := range map[string]struct {
		reason  string
		refused string
	}{
		"still lost":   {etcdv1.ReasonQuorumLost, ""},
		"quorum again": {"Healthy", "has not lost its quorum"},
	} {
		k := recoverFixture(t)
		read, err := k.Cluster(ctx, "db")
		if err != nil {
			t.Fatal(err)
		}
		changed := read.DeepCopy()
		changed.Status.Conditions = []metav1.Condition{{Type: etcdv1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: tt.reason, Message: "written since"}}
		if err := k.Client.Update(ctx, changed); err != nil {
			t.Fatal(err)
		}
		err = requestRecovery(ctx, k, read, memberRequest("db-2"))
		after, _ := k.Cluster(ctx, "db")
		switch {
		case tt.refused == "" && (err != nil || after.Annotations[etcdv1.AnnotationRecoverFrom] != "db-2"):
			t.Errorf("%s: %v, annotations %v; want the request made", name, err, after.Annotations)
		case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused) || after.Annotations[etcdv1.AnnotationRecoverFrom] != ""):
			t.Errorf("%s: %v, annotations %v; want a refusal saying %q and no request", name, err, after.Annotations, tt.refused)
		}
	}
}
