package provisioner

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func boundClaim(request, capacity string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", UID: "u1"},
		Spec: corev1.PersistentVolumeClaimSpec{
			VolumeName: "pvc-u1",
			Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(request)}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}},
	}
}

func volume(provisioner, capacity string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-u1", Annotations: map[string]string{provisionedByAnnotation: provisioner}},
		Spec:       corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}},
	}
}

// A bound claim asking for more gets it on its volume and in its status; another
// provisioner's volume is left alone.
func TestResizeExpandsOurVolumesOnly(t *testing.T) {
	for _, tc := range []struct {
		name, provisioner, wantPV, wantClaim string
	}{
		{"ours", Name, "2Gi", "2Gi"},
		{"another provisioner's", "other", "1Gi", "1Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := boundClaim("2Gi", "1Gi")
			client := fake.NewClientset(claim, volume(tc.provisioner, "1Gi"))
			p := New(client, t.TempDir())
			if !wantsResize(claim) {
				t.Fatal("a bound claim asking for more is not wanted for a resize")
			}
			p.claimChanged(context.Background(), claim)
			pv, err := client.CoreV1().PersistentVolumes().Get(context.Background(), "pvc-u1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := client.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "data", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pvSize, claimSize := pv.Spec.Capacity[corev1.ResourceStorage], got.Status.Capacity[corev1.ResourceStorage]
			if pvSize.String() != tc.wantPV || claimSize.String() != tc.wantClaim {
				t.Errorf("volume %s, claim %s; want %s and %s", pvSize.String(), claimSize.String(), tc.wantPV, tc.wantClaim)
			}
		})
	}
}

func TestWantsResizeOnlyABoundClaimAskingForMore(t *testing.T) {
	pending := boundClaim("2Gi", "1Gi")
	pending.Status.Phase = corev1.ClaimPending
	for name, claim := range map[string]*corev1.PersistentVolumeClaim{
		"at size":      boundClaim("1Gi", "1Gi"),
		"same size":    boundClaim("1024Mi", "1Gi"),
		"smaller":      boundClaim("1Gi", "2Gi"),
		"pending":      pending,
		"not provided": {},
	} {
		if wantsResize(claim) {
			t.Errorf("%s: wanted for a resize", name)
		}
	}
}

// A pending claim is provisioned once: while the binder has not bound it to the volume made
// for it, a resync writes nothing.
func TestAPendingClaimIsProvisionedOnce(t *testing.T) {
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", UID: "u1", Annotations: map[string]string{selectedNodeAnnotation: "node-1"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	client := fake.NewClientset(claim, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ClassName}, Provisioner: Name})
	p := New(client, t.TempDir())
	p.volumes = cache.NewStore(cache.MetaNamespaceKeyFunc)
	creates := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "create" && a.GetResource().Resource == "persistentvolumes" {
				n++
			}
		}
		return n
	}
	p.claimChanged(context.Background(), claim)
	if creates() != 1 {
		t.Fatalf("%d volumes created for a pending claim, want 1", creates())
	}
	pv, err := client.CoreV1().PersistentVolumes().Get(context.Background(), "pvc-u1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.volumes.Add(pv); err != nil { // the informer sees it
		t.Fatal(err)
	}
	p.claimChanged(context.Background(), claim) // a resync before the binder bound it
	if creates() != 1 {
		t.Fatalf("%d creates: the resync created the volume again", creates())
	}
}

// Removing a node for good takes the data of the volumes pinned to it, and only theirs; the
// PersistentVolumes stay.
func TestWipeNodeEmptiesOnlyThatNodesVolumes(t *testing.T) {
	claim := func(uid, node string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Name: "data-" + uid, Namespace: "ns", UID: types.UID(uid), Annotations: map[string]string{selectedNodeAnnotation: node}}}
	}
	client := fake.NewClientset()
	dir := t.TempDir()
	p := New(client, dir)
	for _, c := range []*corev1.PersistentVolumeClaim{claim("a", "node-1"), claim("b", "node-2"), claim("c", "node-2")} {
		if err := p.provision(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "pvc-"+string(c.UID), "member"), []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	wiped, err := p.WipeNode(context.Background(), "node-2")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(wiped)
	if !slices.Equal(wiped, []string{"pvc-b", "pvc-c"}) {
		t.Errorf("wiped %v, want pvc-b and pvc-c", wiped)
	}
	for name, want := range map[string]bool{"pvc-a": true, "pvc-b": false, "pvc-c": false} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s's directory there: %v, want %v", name, err == nil, want)
		}
		if _, err := client.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s: %v, want the PersistentVolume kept", name, err)
		}
	}
}
