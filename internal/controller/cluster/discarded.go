package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/retention"
)

// The data a quorum-loss recovery discards is kept, not deleted: a recovery from one member
// drops the writes only the others had, and a recovery from a snapshot those after it, and
// a person may yet want to read them back (or find the recovery chose wrongly). The member
// finalizer (keepDiscardedPVC) and the snapshot recovery's leftovers (discardLeftovers) mark
// such a PVC with etcdv1.AnnotationDiscardedByRecovery and take the cluster's owner
// references off it (retention.MarkDiscarded). From then on it is no member's: the view
// leaves it out (observeObjects), no member is built on it (rebuildable, retainedPVCs,
// keptData, the member's ensurePVC) and no new member takes its name (freeName,
// foundingNames). It goes when a person deletes it or, with
// spec.quorumLoss.keepDiscardedDataSeconds, once the recovered cluster has served that long
// (decideDiscardedData).

// keptPVC is one PVC of discarded data as the release decision sees it.
type keptPVC struct {
	name   string
	keptAt time.Time // zero when the annotation is no time (set by hand): then it counts from the serving alone
}

// discardedDecision is what becomes of the kept PVCs in this look: which to delete now, when
// to look again for the next one, and the condition that says what is kept (nil when none).
type discardedDecision struct {
	release   []string
	retryIn   time.Duration
	condition *metav1.Condition
}

// decideDiscardedData: without keepFor every PVC is kept until a person deletes it. With it, a
// PVC goes once the cluster has been Available without a break for keepFor, counted from the
// later of Available's last transition to True and the time the PVC was kept: the recovered
// cluster has served, and served on after the data was set aside, so nothing is released on
// a cluster that never came back or lost its quorum again. Nothing goes while a recovery is
// asked for or under way (it may yet discard more; a person is looking at the cluster).
func decideDiscardedData(keepFor *int32, available *metav1.Condition, recovering bool, kept []keptPVC, now time.Time) discardedDecision {
	if len(kept) == 0 {
		return discardedDecision{}
	}
	slices.SortFunc(kept, func(a, b keptPVC) int { return byOrdinal(a.name, b.name) })
	names := make([]string, 0, len(kept))
	for _, k := range kept {
		names = append(names, k.name)
	}
	cond := &metav1.Condition{Type: etcdv1.ConditionDiscardedDataKept, Status: metav1.ConditionTrue, Reason: etcdv1.ReasonKeptUntilDeleted,
		Message: fmt.Sprintf("PVCs %s hold the data of members a quorum-loss recovery discarded; no member uses them. Delete them once you no longer need them (kubectl delete pvc %s), or set spec.quorumLoss.keepDiscardedDataSeconds",
			strings.Join(names, ", "), strings.Join(names, " "))}
	d := discardedDecision{condition: cond}
	if keepFor == nil {
		return d
	}
	cond.Reason = etcdv1.ReasonKeptUntilServed
	period := time.Duration(*keepFor) * time.Second
	serving := available != nil && available.Status == metav1.ConditionTrue && !recovering
	var when []string
	for _, k := range kept {
		if !serving {
			when = append(when, k.name+" once the cluster has been Available for "+period.String())
			continue
		}
		at := later(k.keptAt, available.LastTransitionTime.Time).Add(period)
		if !now.Before(at) {
			d.release = append(d.release, k.name)
			continue
		}
		when = append(when, k.name+" at "+at.UTC().Format(time.RFC3339))
		if wait := at.Sub(now); d.retryIn == 0 || wait < d.retryIn {
			d.retryIn = wait
		}
	}
	if len(when) == 0 {
		d.condition = nil // every kept PVC goes in this look
		return d
	}
	cond.Message = fmt.Sprintf("PVCs %s hold the data of members a quorum-loss recovery discarded; no member uses them. spec.quorumLoss.keepDiscardedDataSeconds deletes each once the cluster has served %s without a break since it was kept: %s; delete them earlier with kubectl delete pvc %s",
		strings.Join(names, ", "), period, strings.Join(when, ", "), strings.Join(names, " "))
	return d
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// recoveryAsked: a recovery of the quorum is asked for or under way.
func recoveryAsked(c *etcdv1.EtcdCluster) bool {
	return c.Annotations[etcdv1.AnnotationRecoverFrom] != "" || c.Annotations[etcdv1.AnnotationRecoverFromSnapshot] != "" || c.Status.SnapshotRecovery != nil
}

// keptOf turns the view's PVCs of discarded data into what the decision reads.
func keptOf(pvcs []*corev1.PersistentVolumeClaim) []keptPVC {
	out := make([]keptPVC, 0, len(pvcs))
	for _, pvc := range pvcs {
		if !pvc.DeletionTimestamp.IsZero() {
			continue
		}
		at, _ := time.Parse(time.RFC3339, pvc.Annotations[etcdv1.AnnotationDiscardedByRecovery])
		out = append(out, keptPVC{name: pvc.Name, keptAt: at})
	}
	return out
}

// releaseDiscardedData applies decideDiscardedData: it deletes the kept PVCs whose time has
// come, each read again live and deleted only while it still is discarded data of this
// cluster by the operator's own marks (pvcOfCluster: labels and no foreign controller), and
// that very object (its UID). It leaves the condition in the view for the status, and says
// when to look again.
func (r *Reconciler) releaseDiscardedData(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) error {
	d := decideDiscardedData(keepDiscardedFor(c), meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable), recoveryAsked(c), keptOf(v.discarded), r.now())
	v.discardedCondition, v.discardedRetry = d.condition, d.retryIn
	for _, name := range d.release {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.reader().Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, pvc); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return err
			}
			continue
		}
		if !retention.DiscardedData(pvc) || !pvcOfCluster(pvc, c) || !pvc.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonDiscardedDataReleased, "ReleaseData",
			"deleted PVC %s, kept since %s with the data of a member a quorum-loss recovery discarded: the cluster has served for spec.quorumLoss.keepDiscardedDataSeconds (%ds) since",
			pvc.Name, pvc.Annotations[etcdv1.AnnotationDiscardedByRecovery], *keepDiscardedFor(c))
	}
	return nil
}

// keepDiscardedFor is spec.quorumLoss.keepDiscardedDataSeconds, nil when absent.
func keepDiscardedFor(c *etcdv1.EtcdCluster) *int32 {
	if c.Spec.QuorumLoss == nil {
		return nil
	}
	return c.Spec.QuorumLoss.KeepDiscardedDataSeconds
}

// setDiscardedCondition puts the decided DiscardedDataKept condition in the status, or takes
// it out when nothing is kept.
func setDiscardedCondition(c *etcdv1.EtcdCluster, cond *metav1.Condition) {
	if cond == nil {
		meta.RemoveStatusCondition(&c.Status.Conditions, etcdv1.ConditionDiscardedDataKept)
		return
	}
	cond.ObservedGeneration = c.Generation
	meta.SetStatusCondition(&c.Status.Conditions, *cond)
}

// discardedNamesLive are the names of the kept discarded data before a founding, read from
// the API server: a recovery from a snapshot marks the old PVCs just before it clears the
// cluster ID, and a cache that has not seen a mark yet would found a member on that PVC's
// name. Once founding members exist their names are fixed, and nothing is read.
func (r *Reconciler) discardedNamesLive(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (map[string]bool, error) {
	if len(v.members) > 0 {
		return nil, nil
	}
	list := &corev1.PersistentVolumeClaimList{}
	if err := r.reader().List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelCluster: c.Name}); err != nil {
		return nil, err
	}
	kept := make([]*corev1.PersistentVolumeClaim, 0, len(list.Items))
	for i := range list.Items {
		if retention.DiscardedData(&list.Items[i]) {
			kept = append(kept, &list.Items[i])
		}
	}
	return discardedNames(kept), nil
}

// discardedNames are the member names whose data a kept PVC holds: no new member may take
// one (its PVC would be the kept one).
func discardedNames(pvcs []*corev1.PersistentVolumeClaim) map[string]bool {
	out := make(map[string]bool, len(pvcs))
	for _, pvc := range pvcs {
		out[pvcMember(pvc)] = true
		out[pvc.Name] = true
	}
	return out
}
