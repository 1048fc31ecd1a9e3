package discarded

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Only the operator's own PVCs marked as discarded data are listed (and so deleted by
// --delete): not the members' PVCs in use, not another manager's PVC that carries the mark,
// not one already going.
func TestDiscardedListsOnlyTheOperatorsKeptData(t *testing.T) {
	pvc := func(name string, labels, annotations map[string]string, deleting bool) corev1.PersistentVolumeClaim {
		p := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
		if deleting {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		return p
	}
	kept := map[string]string{etcdv1.AnnotationDiscardedByRecovery: "2026-12-03T10:00:00Z", etcdv1.AnnotationMemberID: "abc"}
	rows := discardedOf([]corev1.PersistentVolumeClaim{
		pvc("db-3", specs.MemberLabels("db", "db-3"), kept, false),
		pvc("db-1", specs.MemberLabels("db", "db-1"), map[string]string{etcdv1.AnnotationMemberID: "def"}, false),
		pvc("db-2", specs.MemberLabels("db", "db-2"), kept, false),
		pvc("db-cache", map[string]string{etcdv1.LabelCluster: "db", etcdv1.LabelManagedBy: "helm"}, kept, false),
		pvc("db-5", specs.MemberLabels("db", "db-5"), kept, true),
	})
	var names []string
	for _, r := range rows {
		names = append(names, r.PVC)
	}
	if !slices.Equal(names, []string{"db-2", "db-3"}) || rows[0].Member != "db-2" || rows[0].MemberID != "abc" || rows[0].KeptSince != "2026-12-03T10:00:00Z" {
		t.Fatalf("rows %+v", rows)
	}
}
