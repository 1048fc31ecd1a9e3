package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// keptPVC makes the PVC an earlier cluster of this name kept for its member name: no owner,
// the cluster's labels, and the IDs the member recorded on it.
func (h *harness) keptPVC(name, memberID, clusterID string) {
	h.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: specs.MemberLabels("db", name),
		Annotations: map[string]string{etcdv1.AnnotationMemberID: memberID, etcdv1.AnnotationClusterID: clusterID}}}
	if err := h.api.Create(context.Background(), pvc); err != nil {
		h.t.Fatal(err)
	}
}

// A cluster created again under the same name brings back the kept members with their
// member IDs, not a new etcd cluster beside the old data.
func TestNewClusterOfTheSameNameAdoptsKeptPVCs(t *testing.T) {
	h := newHarness(t)
	for i, name := range []string{"db-2", "db-4", "db-5"} {
		h.keptPVC(name, []string{"a2", "a4", "a5"}[i], "c0ffee")
	}
	h.reconcile()
	members := h.members()
	got := map[string]string{}
	for _, m := range members {
		got[m.Name] = m.Status.MemberID
		if m.Spec.Bootstrap.InitialClusterState != etcdv1.InitialClusterStateExisting {
			t.Errorf("member %s would found a new cluster (%s)", m.Name, m.Spec.Bootstrap.InitialClusterState)
		}
	}
	if len(got) != 3 || got["db-2"] != "a2" || got["db-4"] != "a4" || got["db-5"] != "a5" {
		t.Fatalf("members %v, want db-2, db-4, db-5 with the IDs of their PVCs", got)
	}
}

func TestKeptPVCsOfTwoEtcdClustersAreNotMixed(t *testing.T) {
	h := newHarness(t)
	for name, cid := range map[string]string{"db-1": "c0ffee", "db-2": "beef"} {
		h.keptPVC(name, "a", cid)
	}
	h.reconcile()
	if n := len(h.members()); n != 0 {
		t.Fatalf("%d members created on PVCs of two different clusters", n)
	}
	if deg := h.conditionOf("db", etcdv1.ConditionDegraded); deg.Reason != etcdv1.ReasonRetainedDataConflict {
		t.Fatalf("Degraded %s %q", deg.Reason, deg.Message)
	}
}

// createUnfinishedMember makes the EtcdMember memberFromPVC creates before it records the
// member ID, as a crash between the two acts leaves it.
func (h *harness) createUnfinishedMember(name string) {
	h.t.Helper()
	c := h.clusterObj()
	m := h.r.newMember(c, name, etcdv1.MemberBootstrap{
		InitialCluster: specs.InitialCluster(c, []string{name}), InitialClusterState: etcdv1.InitialClusterStateExisting,
	})
	if err := h.r.createMember(context.Background(), c, m); err != nil {
		h.t.Fatal(err)
	}
}

// The operator died between creating a member from a kept PVC and recording its ID: the next
// bootstrap finishes that member and adopts the other kept PVCs too.
func TestAdoptionOfKeptPVCsResumesAfterACrash(t *testing.T) {
	h := newHarness(t)
	for i, name := range []string{"db-1", "db-2", "db-3"} {
		h.keptPVC(name, []string{"a1", "a2", "a3"}[i], "c0ffee")
	}
	h.createUnfinishedMember("db-2")
	h.reconcile()
	got := map[string]string{}
	for _, m := range h.members() {
		got[m.Name] = m.Status.MemberID
	}
	if len(got) != 3 || got["db-1"] != "a1" || got["db-2"] != "a2" || got["db-3"] != "a3" {
		t.Fatalf("members %v, want db-1, db-2, db-3 with the IDs of their PVCs", got)
	}
}

func TestRetainedDataRefusal(t *testing.T) {
	kept := func(version string, ids ...string) []corev1.PersistentVolumeClaim {
		var out []corev1.PersistentVolumeClaim
		for i, id := range ids {
			pvc := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("db-%d", i+1),
				Annotations: map[string]string{etcdv1.AnnotationMemberID: "a", etcdv1.AnnotationClusterID: id}}}
			if version != "" {
				pvc.Annotations[etcdv1.AnnotationEtcdVersion] = version
			}
			out = append(out, pvc)
		}
		return out
	}
	cluster := func(version string, restore *etcdv1.RestoreSource) *etcdv1.EtcdCluster {
		c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{Version: version}}
		if restore != nil {
			c.Spec.Bootstrap = &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: *restore}}
		}
		return c
	}
	yesterday := &etcdv1.RestoreSource{SnapshotRef: &corev1.LocalObjectReference{Name: "yesterday"}}
	s3 := &etcdv1.RestoreSource{S3: &etcdv1.S3SnapshotLocation{Bucket: "b", Key: "k.db"}}
	for _, tc := range []struct {
		name   string
		c      *etcdv1.EtcdCluster
		kept   []corev1.PersistentVolumeClaim
		reason string
		says   []string
	}{
		{"one cluster's data, same version", cluster("3.6.16", nil), kept("3.6.16", "c0ffee", "c0ffee"), "", nil},
		{"no version recorded (kept by an older operator)", cluster("3.5.35", nil), kept("", "c0ffee"), "", nil},
		{"data of an older minor: an upgrade", cluster("3.6.16", nil), kept("3.5.35", "c0ffee"), "", nil},
		{"data of a newer patch", cluster("3.6.15", nil), kept("3.6.16", "c0ffee"), "", nil},
		{"two etcd clusters", cluster("3.6.16", nil), kept("", "c0ffee", "beef"), etcdv1.ReasonRetainedDataConflict, []string{"db-1, db-2", "2 different etcd clusters"}},
		{"data of a newer minor", cluster("3.5.35", nil), kept("3.6.16", "c0ffee", "c0ffee"), etcdv1.ReasonRetainedDataNewer,
			[]string{"PVC db-1", "etcd 3.6.16", "spec.version to 3.6 or later", "delete the PVCs db-1, db-2"}},
		{"a restore from an EtcdSnapshot", cluster("3.6.16", yesterday), kept("3.6.16", "c0ffee", "c0ffee", "c0ffee"), etcdv1.ReasonRetainedDataBlocksRestore,
			[]string{"EtcdSnapshot yesterday", "PVCs db-1, db-2, db-3", "etcd cluster c0ffee", "nothing is created", "Delete those PVCs to restore from the snapshot", "create it without spec.bootstrap.restore"}},
		{"a restore from S3", cluster("3.6.16", s3), kept("", "c0ffee"), etcdv1.ReasonRetainedDataBlocksRestore, []string{"spec.bootstrap.restore asks", "PVCs db-1 "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, message := retainedDataRefusal(tc.c, tc.kept)
			if reason != tc.reason {
				t.Fatalf("reason %q (%s), want %q", reason, message, tc.reason)
			}
			for _, s := range tc.says {
				if !strings.Contains(message, s) {
					t.Fatalf("message %q does not say %q", message, s)
				}
			}
		})
	}
}

// A cluster created again under the name of a deleted one, with spec.bootstrap.restore, finds
// the deleted one's PVCs: it neither serves their data as the snapshot nor writes over them.
// Nothing is created until a person chooses; deleting the PVCs lets the restore go on.
func TestNewClusterWithARestoreRefusesKeptPVCs(t *testing.T) {
	h := newHarness(t)
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) {
		s.Bootstrap = &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: etcdv1.RestoreSource{SnapshotRef: &corev1.LocalObjectReference{Name: "yesterday"}}}}
	})
	for i, name := range []string{"db-1", "db-2", "db-3"} {
		h.keptPVC(name, []string{"a1", "a2", "a3"}[i], "c0ffee")
	}
	h.reconcile()
	h.reconcile()
	if n := len(h.members()); n != 0 {
		t.Fatalf("%d members created on the kept PVCs of a cluster asked to restore a snapshot", n)
	}
	deg := h.conditionOf("db", etcdv1.ConditionDegraded)
	if deg.Reason != etcdv1.ReasonRetainedDataBlocksRestore || !strings.Contains(deg.Message, "PVCs db-1, db-2, db-3") {
		t.Fatalf("Degraded %s %q", deg.Reason, deg.Message)
	}
	for _, name := range []string{"db-1", "db-2", "db-3"} {
		if err := h.api.Delete(context.Background(), h.pvc(name)); err != nil {
			t.Fatal(err)
		}
	}
	h.reconcile()
	if deg := h.conditionOf("db", etcdv1.ConditionDegraded); deg.Reason == etcdv1.ReasonRetainedDataBlocksRestore {
		t.Fatalf("still refused with the PVCs gone: %q", deg.Message)
	}
}
