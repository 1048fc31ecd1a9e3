package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/failpoint"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// A member whose data lives on a local volume (a PersistentVolume whose node affinity pins
// it to one Node) loses that data for good when the Node is deleted, as a cloud deletes the
// Node of a VM it deleted: the PersistentVolume stays, but no Pod can ever be scheduled onto
// it again, and the member stays down forever. spec.nodeLoss replaces such a member after a
// grace period, the way any member whose data is lost is replaced. A member on a network
// volume is not lost with its node: its Pod is scheduled elsewhere and attaches the volume
// there. A tmpfs member's data goes with its Pod, which the Pod garbage collector deletes
// once its Node is gone; it is then replaced as every tmpfs member whose Pod is gone is.

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get

// defaultNodeLossGrace is spec.nodeLoss.gracePeriodSeconds when it is not set.
const defaultNodeLossGrace = 600 * time.Second

// lostNode is where a member's data was: the Node its PersistentVolume is pinned to, which
// no longer exists, or a PersistentVolume that is gone itself (volumeGone; node is then the
// node the scheduler chose for the volume, when the PVC says so).
type lostNode struct {
	node       string
	volume     string
	volumeGone bool
}

// annotationSelectedNode is where the scheduler records the node it chose for a PVC bound on
// first use (WaitForFirstConsumer): the node a local volume was made on.
const annotationSelectedNode = "volume.kubernetes.io/selected-node"

// observeNodeLoss finds, among the members etcd lists that do not answer, those whose PVC is
// bound to a PersistentVolume pinned to a Node that no longer exists. Read live (few: only
// members that are down): a Node the cache has not seen yet must not cost a member its data.
// Without the permission to read Nodes or PersistentVolumes nothing is found lost.
func (r *Reconciler) observeNodeLoss(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) error {
	v.nodeLoss = map[string]lostNode{}
	if !v.reachable || c.Spec.Storage.Medium == etcdv1.StorageMediumMemory {
		return nil
	}
	for _, m := range v.active() {
		em, known := v.etcdMemberFor(c, m)
		pvc := v.pvcs[m.Name]
		if !known || v.healthy[em.ID] || m.Spec.Dormant || pvc == nil || pvc.Spec.VolumeName == "" {
			continue
		}
		lost, err := r.volumeOnGoneNode(ctx, pvc)
		if apierrors.IsForbidden(err) {
			log.FromContext(ctx).Info("cannot tell whether a member's node is gone", "member", m.Name, "reason", err.Error())
			return nil
		}
		if err != nil {
			return err
		}
		if lost != nil {
			v.nodeLoss[m.Name] = *lost
		}
	}
	return nil
}

// volumeOnGoneNode reads the PVC's PersistentVolume and, when it is pinned to one Node, that
// Node: nil unless the Node is gone. A PersistentVolume that is gone itself, with its PVC
// Lost (the PV controller's word that it is not coming back), is lost too, whatever became
// of the node: no Pod can mount the member's data again (a node's cleanup that deletes the
// local volumes of a deleted Node does exactly that).
func (r *Reconciler) volumeOnGoneNode(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*lostNode, error) {
	volume := pvc.Spec.VolumeName
	pv := &corev1.PersistentVolume{}
	if err := r.reader().Get(ctx, client.ObjectKey{Name: volume}, pv); apierrors.IsNotFound(err) {
		if pvc.Status.Phase != corev1.ClaimLost {
			return nil, nil
		}
		return &lostNode{node: pvc.Annotations[annotationSelectedNode], volume: volume, volumeGone: true}, nil
	} else if err != nil {
		return nil, err
	}
	pin := pinnedNode(pv)
	if pin.value == "" {
		return nil, nil
	}
	exists, err := r.nodeExists(ctx, pin)
	if err != nil || exists {
		return nil, err
	}
	return &lostNode{node: pin.value, volume: volume}, nil
}

// nodePin is the one node a volume's affinity admits: value names it under key (a Node
// label), or under metadata.name when key is "".
type nodePin struct {
	key   string
	value string
}

// nodeExists: a Node of the pin's name, or one whose label under the pin's key (the
// hostname label by default) says it: the label a local volume's affinity names need not be
// the Node's name. Either counts, so that a Node is never taken for gone by the wrong
// reading. Metadata only.
func (r *Reconciler) nodeExists(ctx context.Context, pin nodePin) (bool, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	err := r.reader().Get(ctx, client.ObjectKey{Name: pin.value}, obj)
	if err == nil || !apierrors.IsNotFound(err) {
		return err == nil, err
	}
	key := pin.key
	if key == "" {
		key = corev1.LabelHostname
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.reader().List(ctx, list, client.MatchingLabels{key: pin.value}, client.Limit(1)); err != nil {
		return false, err
	}
	return len(list.Items) > 0, nil
}

// pinnedNode is the one Node a PersistentVolume's node affinity admits, no value when it
// admits none in particular (a network volume, or one pinned to a zone or a rack): every term
// must name the same single node, by its name or by a node label (nodeLabel).
func pinnedNode(pv *corev1.PersistentVolume) nodePin {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nodePin{}
	}
	var pin nodePin
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		named := nodeOfTerm(term)
		if named.value == "" || (pin.value != "" && named != pin) {
			return nodePin{}
		}
		pin = named
	}
	return pin
}

func nodeOfTerm(term corev1.NodeSelectorTerm) nodePin {
	for _, req := range term.MatchExpressions {
		if nodeLabel(req.Key) && req.Operator == corev1.NodeSelectorOpIn && len(req.Values) == 1 {
			return nodePin{key: req.Key, value: req.Values[0]}
		}
	}
	for _, req := range term.MatchFields {
		if req.Key == "metadata.name" && req.Operator == corev1.NodeSelectorOpIn && len(req.Values) == 1 {
			return nodePin{value: req.Values[0]}
		}
	}
	return nodePin{}
}

// nodeLabel: the label key names one node, not a place many share (a zone, a rack, a pool):
// the hostname label, which local volumes and most local provisioners use, or a CSI
// driver's node topology key, by the name drivers give it (TopoLVM's
// topology.topolvm.io/node, OpenEBS's openebs.io/nodename, the hostpath driver's
// topology.hostpath.csi/node). Any other key is taken as a place: a volume pinned to a place
// is never counted lost, since a new Node may join it.
func nodeLabel(key string) bool {
	if key == corev1.LabelHostname {
		return true
	}
	_, name, found := strings.Cut(key, "/")
	return found && (name == "node" || name == "nodename" || name == "hostname")
}

// nodeLossAct is what decideNodeLoss says to do about one member whose node is gone.
type nodeLossAct int

const (
	// nodeLossStartClock: first seen; record when (AnnotationNodeLostSince), then wait.
	nodeLossStartClock nodeLossAct = iota
	// nodeLossWait: the grace period is not over.
	nodeLossWait
	// nodeLossReport: policy Manual; only the condition says it.
	nodeLossReport
	// nodeLossRefuse: due, but removing it would cost the quorum.
	nodeLossRefuse
	// nodeLossReplace: due, and the quorum holds without it.
	nodeLossReplace
)

// nodeLossDecision is decideNodeLoss's answer: the act, when the replacement is (or was) due,
// and why it is refused.
type nodeLossDecision struct {
	act   nodeLossAct
	due   time.Time
	grace time.Duration
	why   string
}

// decideNodeLoss decides about member id, whose node is gone, first seen gone at since (zero:
// not yet recorded): under policy ReplaceMember (the default) it is replaced once the grace
// period has passed since then, and only while the voters left keep a healthy quorum.
func decideNodeLoss(policy *etcdv1.NodeLossPolicy, id uint64, since time.Time, members []etcd.Member, healthy map[uint64]bool, now time.Time) nodeLossDecision {
	d := nodeLossDecision{grace: defaultNodeLossGrace}
	if policy != nil && policy.GracePeriodSeconds != nil {
		d.grace = time.Duration(*policy.GracePeriodSeconds) * time.Second
	}
	switch {
	case policy != nil && policy.Policy == etcdv1.NodeLossManual:
		d.act = nodeLossReport
	case since.IsZero():
		d.act, d.due = nodeLossStartClock, now.Add(d.grace)
	case now.Before(since.Add(d.grace)):
		d.act, d.due = nodeLossWait, since.Add(d.grace)
	default:
		d.act, d.due = nodeLossReplace, since.Add(d.grace)
		if ok, why := kit.RemovalVerdict(members, healthy, id); !ok {
			d.act, d.why = nodeLossRefuse, why
		}
	}
	return d
}

// nodeLostSince is when the member's node was first seen gone; zero when not recorded (or
// unreadable, which records it again).
func nodeLostSince(m *etcdv1.EtcdMember) time.Time {
	t, err := time.Parse(time.RFC3339, m.Annotations[etcdv1.AnnotationNodeLostSince])
	if err != nil {
		return time.Time{}
	}
	return t
}

// nodeLossOf decides about one member of the view whose node is gone.
func (v *clusterView) nodeLossOf(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, now time.Time) nodeLossDecision {
	em, _ := v.etcdMemberFor(c, m)
	return decideNodeLoss(c.Spec.NodeLoss, em.ID, nodeLostSince(m), v.etcdMembers, v.healthy, now)
}

// lostMembers are the members of the view whose node is gone, in ordinal order.
func (v *clusterView) lostMembers() []*etcdv1.EtcdMember {
	var out []*etcdv1.EtcdMember
	for _, m := range v.active() {
		if _, lost := v.nodeLoss[m.Name]; lost {
			out = append(out, m)
		}
	}
	return out
}

// replaceOnLostNode applies spec.nodeLoss, one act per look: a clock of a member that is no
// longer lost (its node is back, it serves again) is removed; a member first seen lost gets
// its clock and an event; a member due is confirmed lost again, live, and replaced as a
// damaged member is (marked and deleted: its finalizer removes it from etcd with the quorum
// projected again and deletes its PVC once proven ours; scaling adds a new member as a
// learner). A member the quorum still needs is refused, and the refusal reported.
func (r *Reconciler) replaceOnLostNode(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	if done, err := r.clearNodeLossClocks(ctx, v); done || err != nil {
		return done, err
	}
	now := r.now()
	for _, m := range v.lostMembers() {
		lost, d := v.nodeLoss[m.Name], v.nodeLossOf(c, m, now)
		switch d.act {
		case nodeLossStartClock:
			return true, r.startNodeLossClock(ctx, c, m, lost, d, now)
		case nodeLossRefuse:
			return false, r.refuseReplacement(ctx, c, m, fmt.Sprintf("member %s must be replaced (%s), but not now: %s", m.Name, lost.what(), d.why))
		case nodeLossReplace:
			return r.replaceLost(ctx, c, m, lost)
		}
	}
	return false, nil
}

func (l lostNode) what() string {
	switch {
	case !l.volumeGone:
		return fmt.Sprintf("its node %s is gone, and with it its local volume %s", l.node, l.volume)
	case l.node != "":
		return fmt.Sprintf("its PersistentVolume %s (on node %s) is gone and its PVC is Lost", l.volume, l.node)
	}
	return fmt.Sprintf("its PersistentVolume %s is gone and its PVC is Lost", l.volume)
}

// clearNodeLossClocks removes the clock of a member that is not lost (any more).
func (r *Reconciler) clearNodeLossClocks(ctx context.Context, v *clusterView) (bool, error) {
	for _, m := range v.active() {
		if _, lost := v.nodeLoss[m.Name]; lost || m.Annotations[etcdv1.AnnotationNodeLostSince] == "" {
			continue
		}
		patch := client.MergeFrom(m.DeepCopy())
		delete(m.Annotations, etcdv1.AnnotationNodeLostSince)
		if err := r.Patch(ctx, m, patch); err != nil {
			return true, kit.IgnoreConflict(err)
		}
		return true, nil
	}
	return false, nil
}

func (r *Reconciler) startNodeLossClock(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, lost lostNode, d nodeLossDecision, now time.Time) error {
	patch := client.MergeFrom(m.DeepCopy())
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[etcdv1.AnnotationNodeLostSince] = now.UTC().Format(time.RFC3339)
	if err := r.Patch(ctx, m, patch); err != nil {
		return kit.IgnoreConflict(err)
	}
	r.eventAbout(ctx, c, m, corev1.EventTypeWarning, etcdv1.ReasonNodeLost, "ReplaceMember", "%s", nodeLossMessage(m, lost, d))
	return nil
}

// replaceLost confirms, live, that the member's node is still gone, then replaces it.
func (r *Reconciler) replaceLost(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, lost lostNode) (bool, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.reader().Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: specs.PVCName(m)}, pvc); err != nil || pvc.Spec.VolumeName != lost.volume {
		return false, client.IgnoreNotFound(err)
	}
	still, err := r.volumeOnGoneNode(ctx, pvc)
	if still == nil || err != nil {
		return false, err
	}
	r.eventAbout(ctx, c, m, corev1.EventTypeWarning, etcdv1.ReasonMemberReplacing, "ReplaceMember",
		"replacing member %s (%s): %s; a new member with a new ID takes its place", m.Name, m.Status.MemberID, lost.what())
	return true, r.markAndDelete(ctx, c, m, failpoint.AfterReplaceMark)
}

// nodeLossMessage says what becomes of a member whose node is gone.
func nodeLossMessage(m *etcdv1.EtcdMember, lost lostNode, d nodeLossDecision) string {
	head := fmt.Sprintf("member %s (%s): %s", m.Name, m.Status.MemberID, lost.what())
	due := d.due.UTC().Format(time.RFC3339)
	switch d.act {
	case nodeLossReport:
		return fmt.Sprintf("%s; spec.nodeLoss.policy Manual: replace it with the annotation %s=true on EtcdMember %s", head, etcdv1.AnnotationReplace, m.Name)
	case nodeLossRefuse:
		return fmt.Sprintf("%s; due for replacement since %s, but it cannot be removed now: %s", head, due, d.why)
	case nodeLossReplace:
		return fmt.Sprintf("%s; being replaced by a new member", head)
	}
	return fmt.Sprintf("%s; it will be replaced at %s (spec.nodeLoss.gracePeriodSeconds %d) unless the node comes back",
		head, due, int(d.grace/time.Second))
}

// nodeLossCondition is the Degraded condition's reason NodeLost, naming every lost member;
// ok is false when no member is lost.
func nodeLossCondition(c *etcdv1.EtcdCluster, v *clusterView, now time.Time) (message string, ok bool) {
	var parts []string
	for _, m := range v.lostMembers() {
		parts = append(parts, nodeLossMessage(m, v.nodeLoss[m.Name], v.nodeLossOf(c, m, now)))
	}
	if len(parts) == 0 {
		return "", false
	}
	return strings.Join(parts, "; "), true
}

// nodeLossDueIn is how long until the next member whose node is gone is due for replacement;
// 0 when none waits.
func nodeLossDueIn(c *etcdv1.EtcdCluster, v *clusterView, now time.Time) time.Duration {
	var wait time.Duration
	for _, m := range v.lostMembers() {
		d := v.nodeLossOf(c, m, now)
		if d.act != nodeLossWait {
			continue
		}
		if left := d.due.Sub(now); wait == 0 || left < wait {
			wait = left
		}
	}
	return wait
}
