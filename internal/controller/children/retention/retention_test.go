package retention

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/childtest"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func deleting(c *etcdv1.EtcdCluster) *etcdv1.EtcdCluster {
	c.Spec.PersistentVolumeClaimRetentionPolicy = &etcdv1.PVCRetentionPolicy{WhenDeleted: etcdv1.PVCDelete}
	return c
}

// memberPVC is the PVC of member name of cluster db as the member controller makes it.
func memberPVC(name string, owners ...metav1.OwnerReference) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
		Labels: specs.MemberLabels("db", name), OwnerReferences: owners}}
}

func ownerRef(kind, name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: etcdv1.GroupVersion.String(), Kind: kind, Name: name, UID: types.UID("u-" + name), Controller: &controller}
}

// ownerKinds are the kinds of the PVC's owners, in order.
func ownerKinds(pvc *corev1.PersistentVolumeClaim) []string {
	var kinds []string
	for _, ref := range pvc.OwnerReferences {
		kinds = append(kinds, ref.Kind)
	}
	return kinds
}

func TestRetains(t *testing.T) {
	t.Parallel()
	memory := childtest.Cluster()
	memory.Spec.Storage.Medium = etcdv1.StorageMediumMemory
	retain := childtest.Cluster()
	retain.Spec.PersistentVolumeClaimRetentionPolicy = &etcdv1.PVCRetentionPolicy{WhenDeleted: etcdv1.PVCRetain}
	for _, tc := range []struct {
		name string
		c    *etcdv1.EtcdCluster
		want bool
	}{
		{"no policy: Retain", childtest.Cluster(), true},
		{"Retain", retain, true},
		{"Delete", deleting(childtest.Cluster()), false},
		{"tmpfs has nothing to keep", memory, false},
	} {
		if got := Retains(tc.c); got != tc.want {
			t.Errorf("%s: Retains %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Under Retain nothing of the cluster's owns a PVC, under Delete the cluster controls it; an
// owner that is not the cluster's stays under both.
func TestOwnPerPolicy(t *testing.T) {
	t.Parallel()
	foreign := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u-x"}
	for _, tc := range []struct {
		name    string
		c       *etcdv1.EtcdCluster
		owners  []metav1.OwnerReference
		changed bool
		want    []string // kinds of the owners after, in order
	}{
		{"Retain: none to drop", childtest.Cluster(), nil, false, nil},
		{"Retain: the cluster's and a member's dropped", childtest.Cluster(), []metav1.OwnerReference{ownerRef("EtcdCluster", "db", true), ownerRef("EtcdMember", "db-1", false)}, true, nil},
		{"Retain: another cluster's stays", childtest.Cluster(), []metav1.OwnerReference{ownerRef("EtcdCluster", "other", false)}, false, []string{"EtcdCluster"}},
		{"Retain: a foreign owner stays", childtest.Cluster(), []metav1.OwnerReference{foreign, ownerRef("EtcdCluster", "db", true)}, true, []string{"ConfigMap"}},
		{"Delete: the cluster takes control", deleting(childtest.Cluster()), []metav1.OwnerReference{foreign, ownerRef("EtcdMember", "db-1", true)}, true, []string{"ConfigMap", "EtcdCluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pvc := memberPVC("db-1", tc.owners...)
			changed, err := OwnPerPolicy(tc.c, pvc, childtest.Client(interceptor.Funcs{}).Scheme())
			if err != nil || changed != tc.changed {
				t.Fatalf("changed %v, %v; want %v", changed, err, tc.changed)
			}
			if kinds := ownerKinds(pvc); !slices.Equal(kinds, tc.want) {
				t.Fatalf("owners %v, want kinds %v", pvc.OwnerReferences, tc.want)
			}
		})
	}
	c := deleting(childtest.Cluster())
	pvc := childtest.Owned(t, c, memberPVC("db-1"))
	if changed, err := OwnPerPolicy(c, pvc, childtest.Client(interceptor.Funcs{}).Scheme()); changed || err != nil {
		t.Fatalf("Delete, already controlled: changed %v, %v", changed, err)
	}
}

// Sync moves the owners of the operator's PVCs as the reconcile saw them, and leaves alone a
// PVC being deleted and one the operator did not make.
func TestSyncOwnsTheObservedPVCs(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), childtest.Cluster()
	ours := childtest.Owned(t, c, memberPVC("db-1"))
	ours.Labels[etcdv1.LabelManagedBy] = specs.ManagerName
	notOurs := childtest.Owned(t, c, memberPVC("db-2"))
	delete(notOurs.Labels, etcdv1.LabelManagedBy)
	cl := childtest.Client(interceptor.Funcs{}, ours, notOurs)
	facts := kit.Facts{PVCs: map[string]*corev1.PersistentVolumeClaim{"db-1": ours.DeepCopy(), "db-2": notOurs.DeepCopy()}}
	if err := New(childtest.Objects(cl), nil).Sync(ctx, c, facts); err != nil {
		t.Fatal(err)
	}
	for name, owned := range map[string]bool{"db-1": false, "db-2": true} {
		have := &corev1.PersistentVolumeClaim{}
		if err := childtest.Get(cl, name, have); err != nil || metav1.IsControlledBy(have, c) != owned {
			t.Fatalf("PVC %s owners %v (%v), want controlled by the cluster: %v", name, have.OwnerReferences, err, owned)
		}
	}
}

// The finalizer is on the cluster exactly while it keeps its PVCs.
func TestMarkFollowsThePolicy(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), childtest.Cluster()
	cl := childtest.Client(interceptor.Funcs{}, c)
	p := New(childtest.Objects(cl), nil)
	if err := p.Mark(ctx, c); err != nil || !controllerutil.ContainsFinalizer(c, etcdv1.FinalizerRetainPVCs) {
		t.Fatalf("Retain: finalizers %v, %v", c.Finalizers, err)
	}
	marked := &etcdv1.EtcdCluster{}
	if err := childtest.Get(cl, "db", marked); err != nil || !controllerutil.ContainsFinalizer(marked, etcdv1.FinalizerRetainPVCs) {
		t.Fatalf("Retain: stored finalizers %v, %v", marked.Finalizers, err)
	}
	if err := p.Mark(ctx, deleting(c)); err != nil || controllerutil.ContainsFinalizer(c, etcdv1.FinalizerRetainPVCs) {
		t.Fatalf("Delete: finalizers %v, %v", c.Finalizers, err)
	}
	have := &etcdv1.EtcdCluster{}
	if err := childtest.Get(cl, "db", have); err != nil || len(have.Finalizers) != 0 {
		t.Fatalf("stored finalizers %v, %v", have.Finalizers, err)
	}
}

// A cluster going under Retain lets go of its PVCs, says how many it kept, and takes its
// finalizer off; a PVC controlled by something else is not counted.
func TestFinalizeReleasesThePVCs(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), childtest.Cluster()
	controllerutil.AddFinalizer(c, etcdv1.FinalizerRetainPVCs)
	foreign := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u-x", Controller: new(bool)}
	cl := childtest.Client(interceptor.Funcs{}, c, childtest.Owned(t, c, memberPVC("db-1")), memberPVC("db-2", ownerRef("EtcdMember", "db-2", true)), memberPVC("db-3", foreign))
	recorder := events.NewFakeRecorder(5)
	if err := New(childtest.Objects(cl), recorder).Finalize(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"db-1", "db-2"} {
		have := &corev1.PersistentVolumeClaim{}
		if err := childtest.Get(cl, name, have); err != nil || len(have.OwnerReferences) != 0 {
			t.Fatalf("PVC %s owners %v, %v", name, have.OwnerReferences, err)
		}
	}
	if got := childtest.Events(recorder); len(got) != 1 || !strings.Contains(got[0], etcdv1.ReasonPVCsRetained) || !strings.Contains(got[0], "kept 2 PVCs") {
		t.Fatalf("events %q", got)
	}
	have := &etcdv1.EtcdCluster{}
	if err := childtest.Get(cl, "db", have); err != nil || len(have.Finalizers) != 0 {
		t.Fatalf("stored finalizers %v, %v", have.Finalizers, err)
	}
}

// A PVC deleted between the list and the release was not kept: the count of kept PVCs in
// the event leaves it out, and the cluster still goes.
func TestFinalizeDoesNotCountAPVCGoneMeanwhile(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), childtest.Cluster()
	controllerutil.AddFinalizer(c, etcdv1.FinalizerRetainPVCs)
	gone := interceptor.Funcs{Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if obj.GetName() == "db-2" {
			if err := cl.Delete(ctx, obj); err != nil {
				return err
			}
		}
		return cl.Patch(ctx, obj, patch, opts...)
	}}
	cl := childtest.Client(gone, c, childtest.Owned(t, c, memberPVC("db-1")), childtest.Owned(t, c, memberPVC("db-2")))
	recorder := events.NewFakeRecorder(5)
	if err := New(childtest.Objects(cl), recorder).Finalize(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := childtest.Events(recorder); len(got) != 1 || !strings.Contains(got[0], "kept 1 PVCs") {
		t.Fatalf("events %q, want kept 1 PVCs", got)
	}
	have := &etcdv1.EtcdCluster{}
	if err := childtest.Get(cl, "db", have); err != nil || len(have.Finalizers) != 0 {
		t.Fatalf("stored finalizers %v, %v", have.Finalizers, err)
	}
}

// Under Delete the PVCs stay the cluster's, for garbage collection to take.
func TestFinalizeUnderDeleteLeavesThePVCs(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), deleting(childtest.Cluster())
	controllerutil.AddFinalizer(c, etcdv1.FinalizerRetainPVCs)
	cl := childtest.Client(interceptor.Funcs{}, c, childtest.Owned(t, c, memberPVC("db-1")))
	if err := New(childtest.Objects(cl), nil).Finalize(ctx, c); err != nil {
		t.Fatal(err)
	}
	have := &corev1.PersistentVolumeClaim{}
	if err := childtest.Get(cl, "db-1", have); err != nil || !metav1.IsControlledBy(have, c) {
		t.Fatalf("PVC db-1 owners %v, %v", have.OwnerReferences, err)
	}
	stored := &etcdv1.EtcdCluster{}
	if err := childtest.Get(cl, "db", stored); err != nil || len(stored.Finalizers) != 0 {
		t.Fatalf("stored finalizers %v, %v", stored.Finalizers, err)
	}
}

// A merge patch replaces the whole list of finalizers: Mark and Finalize, writing from a copy
// of the cluster read before someone else added a finalizer, must not drop it. The API server
// refuses their patch with a conflict instead, for the next reconcile to look again.
func TestFinalizersAddedMeanwhileSurvive(t *testing.T) {
	t.Parallel()
	const theirs = "example.com/theirs"
	for name, tc := range map[string]struct {
		finalizers []string
		write      func(*Component, context.Context, *etcdv1.EtcdCluster) error
	}{
		"Mark":     {nil, (*Component).Mark},
		"Finalize": {[]string{etcdv1.FinalizerRetainPVCs}, (*Component).Finalize},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, c := context.Background(), childtest.Cluster()
			c.Finalizers = tc.finalizers
			cl := childtest.Client(interceptor.Funcs{}, c)
			stale := &etcdv1.EtcdCluster{}
			if err := childtest.Get(cl, "db", stale); err != nil {
				t.Fatal(err)
			}
			fresh := stale.DeepCopy()
			controllerutil.AddFinalizer(fresh, theirs)
			if err := cl.Update(ctx, fresh); err != nil {
				t.Fatal(err)
			}
			if err := tc.write(New(childtest.Objects(cl), nil), ctx, stale); !apierrors.IsConflict(err) {
				t.Fatalf("%s from a stale copy: %v, want a conflict", name, err)
			}
			have := &etcdv1.EtcdCluster{}
			if err := childtest.Get(cl, "db", have); err != nil || !controllerutil.ContainsFinalizer(have, theirs) {
				t.Fatalf("stored finalizers %v, %v: %s dropped %s", have.Finalizers, err, name, theirs)
			}
		})
	}
}

// Release says true only when it took the cluster's owners off the PVC, false with the error
// when the API server refused. A merge patch replaces the whole list of owners: one made from
// a PVC read before someone else added an owner is refused with a conflict, and their owner
// stays.
func TestReleaseSaysTrueOnlyWhenItReleased(t *testing.T) {
	t.Parallel()
	foreign := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u-x"}
	unavailable := errors.New("the API server is unavailable")
	refuse := interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
		return unavailable
	}}
	for _, tc := range []struct {
		name           string
		funcs          interceptor.Funcs
		ownedMeanwhile bool
		wantErr        func(error) bool
		want           []string // kinds of the stored owners after, in order
	}{
		{"released", interceptor.Funcs{}, false, nil, nil},
		{"refused", refuse, false, func(err error) bool { return errors.Is(err, unavailable) }, []string{"EtcdCluster"}},
		{"another owner added meanwhile", interceptor.Funcs{}, true, apierrors.IsConflict, []string{"EtcdCluster", "ConfigMap"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c := context.Background(), childtest.Cluster()
			cl := childtest.Client(tc.funcs, childtest.Owned(t, c, memberPVC("db-1")))
			pvc := &corev1.PersistentVolumeClaim{}
			if err := childtest.Get(cl, "db-1", pvc); err != nil {
				t.Fatal(err)
			}
			if tc.ownedMeanwhile {
				fresh := pvc.DeepCopy()
				fresh.OwnerReferences = append(fresh.OwnerReferences, foreign)
				if err := cl.Update(ctx, fresh); err != nil {
					t.Fatal(err)
				}
			}
			released, err := Release(ctx, cl, c, pvc)
			if wantReleased := tc.wantErr == nil; released != wantReleased || (err == nil) != wantReleased || (err != nil && !tc.wantErr(err)) {
				t.Fatalf("Release = %v, %v; want released %v", released, err, wantReleased)
			}
			have := &corev1.PersistentVolumeClaim{}
			if err := childtest.Get(cl, "db-1", have); err != nil {
				t.Fatal(err)
			}
			if kinds := ownerKinds(have); !slices.Equal(kinds, tc.want) {
				t.Fatalf("stored owners %v, want %v", kinds, tc.want)
			}
		})
	}
}

// The member's PVC records the etcd version the member reports, the data's version for a
// later adoption.
func TestRecordDataVersion(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{}
	m := &etcdv1.EtcdMember{}
	if RecordDataVersion(pvc, m) {
		t.Fatal("recorded a version no member reported")
	}
	m.Status.Version = "3.6.16"
	if !RecordDataVersion(pvc, m) || pvc.Annotations[etcdv1.AnnotationEtcdVersion] != "3.6.16" || RecordDataVersion(pvc, m) {
		t.Fatalf("annotations %v", pvc.Annotations)
	}
}
