// Package provisioner gives the local cluster dynamic PersistentVolumes: a directory per claim
// on the host, bound to the Node the scheduler picked (WaitForFirstConsumer), deleted with its
// claim (reclaim policy Delete), and expanded when its claim asks for more (it is the external
// resizer of its volumes: a directory has no size of its own, so expanding is recording the
// new capacity on the PersistentVolume and the claim, as a driver that needs no node step
// would).
package provisioner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

const (
	// Name is the StorageClass provisioner this package serves.
	Name = "local-cluster.etcd-operator.test/directory"
	// ClassName is the default StorageClass of the local cluster.
	ClassName = "local"

	selectedNodeAnnotation  = "volume.kubernetes.io/selected-node"
	provisionedByAnnotation = "pv.kubernetes.io/provisioned-by"
)

// Provisioner creates and deletes the volumes of the local StorageClass.
type Provisioner struct {
	client kubernetes.Interface
	dir    string // volumes live in dir/<pv name>
	// volumes is the informer's store of PersistentVolumes, once Run started it.
	volumes cache.Store
}

// New returns a provisioner keeping volume directories under dir.
func New(client kubernetes.Interface, dir string) *Provisioner {
	return &Provisioner{client: client, dir: dir}
}

// EnsureStorageClass creates the default StorageClass if it is missing.
func (p *Provisioner) EnsureStorageClass(ctx context.Context) error {
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	reclaim := corev1.PersistentVolumeReclaimDelete
	expand := true
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:          Name,
		VolumeBindingMode:    &mode,
		ReclaimPolicy:        &reclaim,
		AllowVolumeExpansion: &expand,
	}
	_, err := p.client.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// Run provisions and deletes volumes until ctx ends. A periodic resync retries anything that
// failed.
func (p *Provisioner) Run(ctx context.Context) {
	factory := informers.NewSharedInformerFactory(p.client, 10*time.Second)
	claims := factory.Core().V1().PersistentVolumeClaims().Informer()
	volumes := factory.Core().V1().PersistentVolumes().Informer()
	p.volumes = volumes.GetStore()
	_, _ = claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.claimChanged(ctx, obj) },
		UpdateFunc: func(_, obj any) { p.claimChanged(ctx, obj) },
	})
	_, _ = volumes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.volumeChanged(ctx, obj) },
		UpdateFunc: func(_, obj any) { p.volumeChanged(ctx, obj) },
	})
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
}

func (p *Provisioner) claimChanged(ctx context.Context, obj any) {
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if wantsResize(claim) {
		if err := p.resize(ctx, claim); err != nil {
			klog.ErrorS(err, "expanding failed; retrying on resync", "claim", klog.KObj(claim))
		}
		return
	}
	if !p.wants(ctx, claim) {
		return
	}
	if err := p.provision(ctx, claim); err != nil {
		klog.ErrorS(err, "provisioning failed; retrying on resync", "claim", klog.KObj(claim))
	}
}

// wantsResize is true for a bound claim that asks for more than it has.
func wantsResize(claim *corev1.PersistentVolumeClaim) bool {
	if claim.Spec.VolumeName == "" || claim.DeletionTimestamp != nil || claim.Status.Phase != corev1.ClaimBound {
		return false
	}
	want := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	have := claim.Status.Capacity[corev1.ResourceStorage]
	return want.Cmp(have) > 0
}

// resize expands one of our volumes to its claim's request: first the PersistentVolume's
// capacity, then the claim's status, so that a failure in between is retried from the start.
func (p *Provisioner) resize(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	pv, err := p.client.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pv.Annotations[provisionedByAnnotation] != Name {
		return nil // another provisioner's volume
	}
	want := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if have := pv.Spec.Capacity[corev1.ResourceStorage]; want.Cmp(have) > 0 {
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: want}
		if _, err := p.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	claim = claim.DeepCopy()
	from := claim.Status.Capacity[corev1.ResourceStorage]
	if claim.Status.Capacity == nil {
		claim.Status.Capacity = corev1.ResourceList{}
	}
	claim.Status.Capacity[corev1.ResourceStorage] = want
	if _, err := p.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		return err
	}
	klog.InfoS("expanded", "volume", pv.Name, "claim", klog.KObj(claim), "from", from.String(), "to", want.String())
	return nil
}

// wants is true for a pending claim of our class on which the scheduler has picked a node.
func (p *Provisioner) wants(ctx context.Context, claim *corev1.PersistentVolumeClaim) bool {
	if claim.Spec.VolumeName != "" || claim.DeletionTimestamp != nil || claim.Annotations[selectedNodeAnnotation] == "" {
		return false
	}
	if p.provisioned(claim) {
		// Made already; the controller-manager's binder has not bound it yet. Creating it
		// again on every resync would be a refused write every ten seconds per claim.
		return false
	}
	className := ClassName
	if claim.Spec.StorageClassName != nil {
		className = *claim.Spec.StorageClassName
	}
	class, err := p.client.StorageV1().StorageClasses().Get(ctx, className, metav1.GetOptions{})
	return err == nil && class.Provisioner == Name
}

// provisioned is true when the informer has seen the claim's volume.
func (p *Provisioner) provisioned(claim *corev1.PersistentVolumeClaim) bool {
	if p.volumes == nil {
		return false
	}
	_, exists, err := p.volumes.GetByKey(volumeName(claim))
	return err == nil && exists
}

func volumeName(claim *corev1.PersistentVolumeClaim) string {
	return "pvc-" + string(claim.UID)
}

// provision makes the directory and a PersistentVolume pre-bound to the claim; the
// controller-manager's binder completes the binding.
func (p *Provisioner) provision(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	name := volumeName(claim)
	path := filepath.Join(p.dir, name)
	if err := os.MkdirAll(path, 0o777); err != nil {
		return err
	}
	node := claim.Annotations[selectedNodeAnnotation]
	size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	className := ClassName
	if claim.Spec.StorageClassName != nil {
		className = *claim.Spec.StorageClassName
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{provisionedByAnnotation: Name}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   claim.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              className,
			VolumeMode:                    claim.Spec.VolumeMode,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node},
				}}}},
			}},
		},
	}
	_, err := p.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		klog.InfoS("provisioned", "volume", name, "claim", klog.KObj(claim), "node", node, "size", size.String())
	}
	return err
}

func (p *Provisioner) volumeChanged(ctx context.Context, obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || pv.Annotations[provisionedByAnnotation] != Name || pv.Status.Phase != corev1.VolumeReleased ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return
	}
	if err := p.delete(ctx, pv); err != nil {
		klog.ErrorS(err, "deleting a released volume failed; retrying on resync", "volume", pv.Name)
	}
}

// delete removes a released volume's directory, then the PersistentVolume.
func (p *Provisioner) delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.Local == nil || filepath.Dir(pv.Spec.Local.Path) != p.dir {
		return fmt.Errorf("volume %s is not a directory of this provisioner", pv.Name)
	}
	if err := os.RemoveAll(pv.Spec.Local.Path); err != nil {
		return err
	}
	err := p.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		klog.InfoS("deleted released volume", "volume", pv.Name)
	}
	return err
}

// WipeNode does to this provisioner's volumes on node what the loss of the machine does to
// local disks: every volume pinned to it loses its directory, data and all. The
// PersistentVolumes stay, as they do on a real cluster whose Node is deleted; no Pod can use
// them again unless a machine of that name comes back (and then finds no data: the agent
// refuses a local volume whose directory is gone, as a kubelet does). It returns the
// volumes it wiped.
func (p *Provisioner) WipeNode(ctx context.Context, node string) ([]string, error) {
	pvs, err := p.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var wiped []string
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if pv.Annotations[provisionedByAnnotation] != Name || pinnedTo(pv) != node {
			continue
		}
		if pv.Spec.Local == nil || filepath.Dir(pv.Spec.Local.Path) != p.dir {
			return wiped, fmt.Errorf("volume %s is not a directory of this provisioner", pv.Name)
		}
		if err := os.RemoveAll(pv.Spec.Local.Path); err != nil {
			return wiped, err
		}
		wiped = append(wiped, pv.Name)
	}
	return wiped, nil
}

// pinnedTo is the node a volume of this provisioner is bound to (provision writes one term
// with one hostname).
func pinnedTo(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, req := range term.MatchExpressions {
			if req.Key == corev1.LabelHostname && req.Operator == corev1.NodeSelectorOpIn && len(req.Values) == 1 {
				return req.Values[0]
			}
		}
	}
	return ""
}
