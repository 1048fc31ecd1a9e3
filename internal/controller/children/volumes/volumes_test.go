package volumes

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/childtest"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
)

func vol(name, spec, requested, capacity string) volumeFacts {
	f := volumeFacts{member: name, specSize: resource.MustParse(spec)}
	if requested != "" {
		f.hasPVC, f.requested = true, resource.MustParse(requested)
	}
	if capacity != "" {
		f.capacity = resource.MustParse(capacity)
	}
	return f
}

func TestPlanVolumes(t *testing.T) {
	expandable := classFacts{name: "local", found: true, expandable: true}
	fixed := classFacts{name: "fixed", found: true}
	pending := vol("b", "2Gi", "2Gi", "1Gi")
	pending.resizePending = true
	for _, tc := range []struct {
		name       string
		want       string
		class      classFacts
		vols       []volumeFacts
		grow       string // members, comma-separated
		reason     string // "" when no condition
		status     metav1.ConditionStatus
		inMessages []string
	}{
		{"at size", "1Gi", expandable, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi"), vol("b", "1Gi", "1Gi", "1Gi")}, "", etcdv1.ReasonVolumesAsRequested, metav1.ConditionTrue, []string{"every member's PVC holds 1Gi"}},
		{"the same size written differently", "1024Mi", fixed, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi")}, "", etcdv1.ReasonVolumesAsRequested, metav1.ConditionTrue, nil},
		{"grown on an expandable class: every member moves", "2Gi", expandable, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi"), vol("b", "1Gi", "1Gi", "1Gi")}, "a,b", etcdv1.ReasonVolumesExpanding, metav1.ConditionFalse, []string{"to 2Gi", "a (1Gi), b (1Gi)"}},
		{"asked, the volume not grown yet", "2Gi", expandable, []volumeFacts{vol("a", "2Gi", "2Gi", "1Gi"), vol("b", "2Gi", "2Gi", "2Gi")}, "", etcdv1.ReasonVolumesExpanding, metav1.ConditionFalse, []string{"a (1Gi)"}},
		{"grown, waiting for the Pod to grow the filesystem", "2Gi", expandable, []volumeFacts{vol("a", "2Gi", "2Gi", "2Gi"), pending}, "", etcdv1.ReasonFileSystemResizePending, metav1.ConditionFalse, []string{"volumes of b", "delete each member's Pod"}},
		{"a class without expansion: nobody moves", "2Gi", fixed, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi"), vol("b", "1Gi", "1Gi", "1Gi")}, "", etcdv1.ReasonExpansionNotAllowed, metav1.ConditionFalse, []string{"StorageClass fixed does not allow volume expansion", "keep their 1Gi volumes", "allowVolumeExpansion: true"}},
		{"a class without expansion: a member without a PVC yet still moves", "2Gi", fixed, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi"), vol("c", "1Gi", "", "")}, "c", etcdv1.ReasonExpansionNotAllowed, metav1.ConditionFalse, nil},
		{"no class on the PVCs", "2Gi", classFacts{}, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi")}, "", etcdv1.ReasonExpansionNotAllowed, metav1.ConditionFalse, []string{"no StorageClass"}},
		{"the class is gone", "2Gi", classFacts{name: "gone"}, []volumeFacts{vol("a", "1Gi", "1Gi", "1Gi")}, "", etcdv1.ReasonStorageClassNotFound, metav1.ConditionFalse, []string{"StorageClass gone does not exist"}},
		{"a new member's PVC is pending at the new size", "2Gi", fixed, []volumeFacts{vol("a", "2Gi", "2Gi", "2Gi"), vol("d", "2Gi", "2Gi", "")}, "", etcdv1.ReasonVolumesAsRequested, metav1.ConditionTrue, nil},
		{"no PVC yet: no condition", "2Gi", fixed, []volumeFacts{vol("a", "1Gi", "", "")}, "a", "", "", nil},
		{"a smaller spec never shrinks a member", "1Gi", expandable, []volumeFacts{vol("a", "2Gi", "2Gi", "2Gi")}, "", etcdv1.ReasonVolumesAsRequested, metav1.ConditionTrue, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := planVolumes(resource.MustParse(tc.want), tc.class, tc.vols)
			if got := strings.Join(plan.grow, ","); got != tc.grow {
				t.Errorf("grow = %q, want %q", got, tc.grow)
			}
			if tc.reason == "" {
				if plan.cond != nil {
					t.Fatalf("condition %+v, want none", plan.cond)
				}
				return
			}
			if plan.cond == nil || plan.cond.Reason != tc.reason || plan.cond.Status != tc.status || plan.cond.Type != etcdv1.ConditionVolumesResized {
				t.Fatalf("condition %+v, want %s %s", plan.cond, tc.status, tc.reason)
			}
			for _, part := range tc.inMessages {
				if !strings.Contains(plan.cond.Message, part) {
					t.Errorf("message %q does not say %q", plan.cond.Message, part)
				}
			}
		})
	}
}

// observed is a cluster of size members, each on a bound PVC of class of that size, and the
// facts of it a reconcile would pass.
func observed(t *testing.T, size, class string, names ...string) (*etcdv1.EtcdCluster, kit.Facts, []client.Object) {
	t.Helper()
	c := childtest.Cluster()
	q := resource.MustParse(size)
	c.Spec.Storage.Size = &q
	facts := kit.Facts{PVCs: map[string]*corev1.PersistentVolumeClaim{}}
	var objs []client.Object
	for _, name := range names {
		m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: etcdv1.EtcdMemberSpec{Storage: etcdv1.StorageSpec{Size: &q}}}
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec:   corev1.PersistentVolumeClaimSpec{StorageClassName: &class, Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: q}}}
		facts.Members = append(facts.Members, m)
		facts.PVCs[name] = pvc
		objs = append(objs, m.DeepCopy())
	}
	return c, facts, objs
}

func storedSizes(t *testing.T, cl client.Client, names ...string) string {
	t.Helper()
	var sizes []string
	for _, name := range names {
		m := &etcdv1.EtcdMember{}
		if err := childtest.Get(cl, name, m); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, name+"="+m.Spec.Storage.Size.String())
	}
	return strings.Join(sizes, ",")
}

// A larger size on a class without expansion writes no member; on one with expansion every
// member moves, with an event each, and the condition says the PVCs are expanding.
func TestSyncGrowsOnlyOnAnExpandableClass(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, sizes, reason string
		expandable          bool
		events              int
	}{
		{"fixed", "db-1=1Gi,db-2=1Gi", etcdv1.ReasonExpansionNotAllowed, false, 0},
		{"expandable", "db-1=2Gi,db-2=2Gi", etcdv1.ReasonVolumesExpanding, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, facts, objs := observed(t, "1Gi", "standard", "db-1", "db-2")
			bigger := resource.MustParse("2Gi")
			c.Spec.Storage.Size = &bigger
			class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "x", AllowVolumeExpansion: &tc.expandable}
			cl := childtest.Client(interceptor.Funcs{}, append(objs, class)...)
			recorder := events.NewFakeRecorder(5)
			cond, err := New(childtest.Objects(cl), recorder).Sync(context.Background(), c, facts)
			if err != nil || cond == nil || cond.Reason != tc.reason || cond.Type != etcdv1.ConditionVolumesResized {
				t.Fatalf("condition %+v, %v; want %s", cond, err, tc.reason)
			}
			if got := storedSizes(t, cl, "db-1", "db-2"); got != tc.sizes {
				t.Fatalf("members %s, want %s", got, tc.sizes)
			}
			got := childtest.Events(recorder)
			if len(got) != tc.events {
				t.Fatalf("events %q, want %d", got, tc.events)
			}
			if tc.events > 0 && (!strings.Contains(got[0], etcdv1.ReasonGrowingVolume) || !strings.Contains(got[0], "member db-1: storage size 1Gi -> 2Gi")) {
				t.Fatalf("event %q", got[0])
			}
		})
	}
}

// The class is looked up only when a PVC is to grow: a class that does not exist says so
// then, and costs nothing at rest.
func TestSyncLooksTheClassUpOnlyToGrow(t *testing.T) {
	t.Parallel()
	c, facts, objs := observed(t, "1Gi", "gone", "db-1")
	gets := 0
	cl := childtest.Client(interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*storagev1.StorageClass); ok {
			gets++
		}
		return cl.Get(ctx, key, obj, opts...)
	}}, objs...)
	g := New(childtest.Objects(cl), nil)
	cond, err := g.Sync(context.Background(), c, facts)
	if err != nil || cond == nil || cond.Reason != etcdv1.ReasonVolumesAsRequested || cond.Status != metav1.ConditionTrue || gets != 0 {
		t.Fatalf("at size: condition %+v, %v, %d StorageClass reads", cond, err, gets)
	}
	bigger := resource.MustParse("2Gi")
	c.Spec.Storage.Size = &bigger
	cond, err = g.Sync(context.Background(), c, facts)
	if err != nil || cond == nil || cond.Reason != etcdv1.ReasonStorageClassNotFound || gets != 1 {
		t.Fatalf("grown: condition %+v, %v, %d StorageClass reads", cond, err, gets)
	}
}

// A tmpfs cluster's members grow through their Pods' size limit, whatever the class; it has
// no PVCs, so no condition.
func TestSyncOfATmpfsClusterGrowsWithoutCondition(t *testing.T) {
	t.Parallel()
	c, facts, objs := observed(t, "1Gi", "", "db-1")
	c.Spec.Storage.Medium = etcdv1.StorageMediumMemory
	facts.PVCs = nil
	bigger := resource.MustParse("2Gi")
	c.Spec.Storage.Size = &bigger
	cl := childtest.Client(interceptor.Funcs{}, objs...)
	cond, err := New(childtest.Objects(cl), nil).Sync(context.Background(), c, facts)
	if err != nil || cond != nil {
		t.Fatalf("condition %+v, %v; want none", cond, err)
	}
	if got := storedSizes(t, cl, "db-1"); got != "db-1=2Gi" {
		t.Fatalf("members %s", got)
	}
}
