package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/failpoint"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func waitFor(reason, format string, args ...any) error {
	return kit.Waiting{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// step makes at most one change, the first that applies, in this order: bootstrap, rebuilding
// members from their PVCs, pause, resume, bookkeeping of IDs, orphan learners, disarming the
// alarms of members etcd no longer lists, replacing a damaged member, then one whose node is
// gone for good (spec.nodeLoss), finishing an interrupted add, promotion, voters' Pods that
// still name their peers, adoption, scaling. It reports whether it changed something.
// At V(1) it logs which step it took and on what view, once per reconcile.
func (r *Reconciler) step(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	name, done, err := r.chooseStep(ctx, c, v)
	logStep(ctx, c, v, name, done, err)
	return done, err
}

// stepFunc is one step of the ordered list: whether it changed something, or why it cannot.
type stepFunc func(context.Context, *etcdv1.EtcdCluster, *clusterView) (bool, error)

// namedStep is a step with the name the V(1) log gives it.
type namedStep struct {
	name string
	act  stepFunc
}

// chooseStep runs the ordered step list up to the first step that acts or cannot, and names
// it ("" when none applies).
func (r *Reconciler) chooseStep(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (string, bool, error) {
	if err := waitForAdoption(c, v); err != nil {
		return "waitForAdoption", false, err
	}
	replicas := int(ptrOr(c.Spec.Replicas, 3))
	if name, done, err := firstStep(ctx, c, v, r.formingSteps(replicas), nil); name != "" {
		return name, done && err == nil, err
	}
	if replicas == 0 {
		return "", false, nil
	}
	if !v.reachable {
		return r.withoutQuorum(ctx, c, v)
	}
	var held heldRefusal
	if name, done, err := firstStep(ctx, c, v, r.quorumSteps(), &held); name != "" {
		return name, done && err == nil, err
	}
	if done, err := r.scale(ctx, c, v, replicas); !held.hold("scale", done, err) && (done || err != nil) {
		return "scale", done, err
	}
	// A CA rotation marks members whose trusted CAs change; the rolling restart next restarts
	// them, so waiting for it is no step.
	if done, err := r.rotateCAs(ctx, c, v); done || err != nil {
		return "rotateCAs", done, err
	}
	if done, err := r.rollOutdatedPods(ctx, c, v); done || err != nil {
		return "rollOutdatedPods", done, err
	}
	return held.name, false, held.err
}

// heldRefusal is the first membership change a step refused because the etcd patch makes it
// unsafe (ReasonMembershipUnsafe): the steps after it still run, the rolling restart and the
// upgrade among them, as moving to a fixed patch is the way out; the refusal is what the
// reconcile reports only when none of them acts or waits.
type heldRefusal struct {
	name string
	err  error
}

// hold keeps a step's result when it is such a refusal (the first one kept), and says so.
func (h *heldRefusal) hold(name string, done bool, err error) bool {
	var w kit.Waiting
	if h == nil || done || !errors.As(err, &w) || w.Reason != etcdv1.ReasonMembershipUnsafe {
		return false
	}
	if h.err == nil {
		h.name, h.err = name, err
	}
	return true
}

// formingSteps come before anything that needs a quorum.
func (r *Reconciler) formingSteps(replicas int) []namedStep {
	with := func(act func(context.Context, *etcdv1.EtcdCluster, *clusterView, int) (bool, error)) stepFunc {
		return func(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
			return act(ctx, c, v, replicas)
		}
	}
	return []namedStep{
		// A recovery from a snapshot owns the cluster from its request to the new cluster's
		// first answer: no other step may act on members it is discarding.
		{"recoverFromSnapshot", with(r.recoverFromSnapshotStep)}, {"bootstrap", with(r.bootstrap)},
		{"rebuildFromPVCs", with(r.rebuildFromPVCs)}, {"pauseOrResume", with(r.pauseOrResume)},
	}
}

// quorumSteps need etcd to answer; scaling and rolling Pods come after them.
func (r *Reconciler) quorumSteps() []namedStep {
	return []namedStep{
		{"finishRecovery", r.finishRecovery}, {"recordIdentities", r.recordIdentities},
		{"removeOrphanLearners", r.removeOrphanLearners}, {"disarmStaleAlarms", r.disarmStaleAlarms},
		{"replaceDamaged", r.replaceDamaged}, {"replaceOnLostNode", r.replaceOnLostNode},
		{"addPending", r.addPending}, {"promoteLearners", r.promoteLearners}, {"requireDataOfVoters", r.requireDataOfVoters},
		{"adoptOrphanVoters", r.adoptOrphanVoters},
	}
}

// firstStep runs steps in order up to the first that acts or cannot: its name, whether it
// changed something, and its error; "" when none did.
func firstStep(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, steps []namedStep, held *heldRefusal) (string, bool, error) {
	for _, s := range steps {
		if done, err := s.act(ctx, c, v); !held.hold(s.name, done, err) && (done || err != nil) {
			return s.name, done, err
		}
	}
	return "", false, nil
}

// withoutQuorum: while etcd does not answer, only a recovery acts: one a person asked for, or
// the one spec.quorumLoss asks for after its grace period.
func (r *Reconciler) withoutQuorum(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (string, bool, error) {
	name, done, err := firstStep(ctx, c, v, []namedStep{
		{"recoverAutomatically", r.recoverAutomatically}, {"recoverQuorum", r.recoverQuorum},
	}, nil)
	if name != "" {
		return name, done && err == nil, err
	}
	return "waitForQuorum", false, unreachable(c, v)
}

// logStep says at V(1) which step a reconcile took and on what (kit.Step): the spec's
// replicas and what the look saw of the members. Nothing of a Secret.
func logStep(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, name string, done bool, err error) {
	if !log.FromContext(ctx).V(1).Enabled() {
		return
	}
	learners := 0
	for _, m := range v.etcdMembers {
		if m.IsLearner {
			learners++
		}
	}
	kit.Step{Name: name, Changed: done, Facts: []any{"replicas", ptrOr(c.Spec.Replicas, 3), "members", len(v.members),
		"etcdMembers", len(v.etcdMembers), "learners", learners, "reachable", v.reachable, "leader", etcd.FormatID(v.leader)}}.Log(ctx, err)
}

// unreachable says why no step can be taken while etcd does not answer: a formed cluster
// that lost its quorum, or one whose members never answered.
func unreachable(c *etcdv1.EtcdCluster, v *clusterView) error {
	if c.Status.ClusterID != "" {
		return waitFor(etcdv1.ReasonQuorumLost, "%s", quorumLostMessage(v.survivors))
	}
	return waitFor(etcdv1.ReasonUnreachable, "etcd does not answer through any member")
}

func ptrOr[T any](p *T, fallback T) T {
	if p == nil {
		return fallback
	}
	return *p
}

// bootstrap creates the founding members all at once with a static initial cluster. A crash
// in the middle is finished from the initial cluster the first members recorded.
func (r *Reconciler) bootstrap(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, replicas int) (bool, error) {
	if c.Status.ClusterID != "" || v.reachable {
		return false, nil
	}
	// PVCs kept from a deleted cluster of this name: bring that cluster back, not a new one.
	// Not in a recovery from a snapshot: it kept the old cluster's PVCs as discarded data.
	if c.Status.SnapshotRecovery == nil {
		if done, err := r.adoptRetainedPVCs(ctx, c, v); done || err != nil {
			return done, err
		}
	}
	taken, err := r.discardedNamesLive(ctx, c, v)
	if err != nil {
		return true, err
	}
	names := foundingNames(c, v.members, foundingCount(c, replicas), taken)
	if len(names) == 0 {
		return false, nil
	}
	var missing []string
	for _, name := range names {
		if memberNamed(v.members, name) == nil {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return true, foundingWait(names, v.pods)
	}
	restore, err := r.foundingRestore(ctx, c, v)
	if err != nil {
		return true, err
	}
	initial := specs.InitialCluster(c, names)
	for _, name := range missing {
		b := etcdv1.MemberBootstrap{InitialCluster: initial, InitialClusterState: etcdv1.InitialClusterStateNew, ClusterToken: c.Status.ClusterToken, Restore: restore.DeepCopy()}
		m := r.newMember(c, name, b)
		if err := r.createMember(ctx, c, m); err != nil {
			return true, err
		}
		failpoint.Crash(c, failpoint.AfterBootstrapMember)
	}
	r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonBootstrapping, "Bootstrap", "bootstrapping %d members: %s", len(names), strings.Join(names, ", "))
	return true, nil
}

// foundingRestore is what the founding members restore: the snapshot a recovery after a lost
// quorum names, whatever the cluster was first bootstrapped from, or the cluster's
// spec.bootstrap.restore; nil for an empty start. An EtcdSnapshot a snapshotRef names is held
// for the restore (holdSnapshot) before the member that needs its file is created.
func (r *Reconciler) foundingRestore(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (*etcdv1.MemberRestore, error) {
	switch rec := c.Status.SnapshotRecovery; {
	case rec != nil:
		return &rec.Restore, nil
	case c.Spec.Bootstrap == nil || c.Spec.Bootstrap.Restore == nil:
		return nil, nil
	case v.restoreSource == nil:
		// No member is created, so none can serve (or start empty) until the source can be
		// used; an EtcdSnapshot changing wakes the cluster.
		return nil, waitFor(etcdv1.ReasonRestoreFailed, "%s", v.restoreFailure)
	}
	if name := v.restoreSource.Snapshot; name != "" {
		why, err := r.holdSnapshot(ctx, c, name)
		if err != nil {
			return nil, err
		}
		if why != "" {
			return nil, waitFor(etcdv1.ReasonRestoreFailed, "spec.bootstrap.restore.source.snapshotRef: %s: delete this EtcdCluster and create it again naming a Complete EtcdSnapshot (spec.bootstrap cannot change)", why)
		}
	}
	return v.restoreSource, nil
}

// foundingNames are the members of the first bootstrap: from an existing founding member's
// initial cluster, or chosen now.
func foundingNames(c *etcdv1.EtcdCluster, members []*etcdv1.EtcdMember, replicas int, taken map[string]bool) []string {
	for _, m := range members {
		if m.Spec.Bootstrap.InitialClusterState == etcdv1.InitialClusterStateNew {
			var names []string
			for _, part := range strings.Split(m.Spec.Bootstrap.InitialCluster, ",") {
				names = append(names, strings.SplitN(part, "=", 2)[0])
			}
			return names
		}
	}
	if len(members) > 0 {
		return nil // members exist that joined an existing cluster: this is no first bootstrap
	}
	// A name whose PVC holds discarded data (a recovery from a snapshot keeps the old
	// members' PVCs) is skipped: a member of that name would start on that PVC.
	names := make([]string, 0, replicas)
	for i := 1; len(names) < replicas; i++ {
		if name := specs.MemberName(c.Name, i); !taken[name] {
			names = append(names, name)
		}
	}
	return names
}

func memberNamed(members []*etcdv1.EtcdMember, name string) *etcdv1.EtcdMember {
	for _, m := range members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

func (r *Reconciler) newMember(c *etcdv1.EtcdCluster, name string, b etcdv1.MemberBootstrap) *etcdv1.EtcdMember {
	m := &etcdv1.EtcdMember{
		ObjectMeta: specs.WithAdditionalMetadata(c, metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: specs.MemberLabels(c.Name, name)}),
		Spec: etcdv1.EtcdMemberSpec{
			ClusterName: c.Name, Version: wantVersion(c), Storage: *c.Spec.Storage.DeepCopy(), Bootstrap: b,
			TLS: memberTLS(c),
		},
	}
	return m
}

// memberTLS names the Secrets a member mounts.
func memberTLS(c *etcdv1.EtcdCluster) *etcdv1.MemberTLS {
	if c.Spec.TLS == nil {
		return nil
	}
	t := &etcdv1.MemberTLS{ClientCertAuth: specs.ClientCertAuth(c), ClientCASecretName: specs.ClientCASecretName(c)}
	if cl := c.Spec.TLS.Client; cl != nil {
		t.ServerSecretName = c.Name + "-server-tls"
		if cl.ServerSecretRef != nil {
			t.ServerSecretName = cl.ServerSecretRef.Name
		}
	}
	if specs.PeerSecretTLS(c) {
		t.PeerSecretName = c.Name + "-peer-tls"
		if ref := c.Spec.TLS.Peer.SecretRef; ref != nil {
			t.PeerSecretName = ref.Name
		}
	}
	if rot := c.Status.CARotation; rot != nil && rot.BundleHash != "" {
		// A cluster whose CA was rotated: a new member trusts what the others trust.
		t.CABundleSecretName, t.CABundleHash = specs.CABundleSecretName(c.Name), rot.BundleHash
	} else if rot != nil {
		// The ca.crt of the cluster's own Secrets, as the others are to trust it.
		t.CABundleHash = rot.SecretsHash
	}
	return t
}

func (r *Reconciler) createMember(ctx context.Context, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) error {
	if err := controllerutil.SetControllerReference(c, m, r.Scheme()); err != nil {
		return err
	}
	err := r.Create(ctx, m)
	if isAlreadyExists(err) {
		// Ours from an earlier attempt, or someone else's that must not be taken for ours.
		have := &etcdv1.EtcdMember{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(m), have); err != nil {
			return err
		}
		return kit.NotOurs(have, c, "EtcdMember", "EtcdCluster")
	}
	return kit.RefusedByAPI(err, "EtcdMember", m.Name)
}

// pauseOrResume flips every member's dormant flag; no membership changes, so a paused
// cluster resumes with the same cluster and member IDs.
func (r *Reconciler) pauseOrResume(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView, replicas int) (bool, error) {
	dormant := replicas == 0
	changed := 0
	for _, m := range v.active() {
		if m.Spec.Dormant == dormant {
			continue
		}
		patch := client.MergeFrom(m.DeepCopy())
		m.Spec.Dormant = dormant
		if err := r.Patch(ctx, m, patch); err != nil {
			return true, err
		}
		failpoint.Crash(c, failpoint.AfterDormantFlip)
		changed++
	}
	if changed == 0 {
		return false, nil
	}
	if dormant {
		r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonPaused, "Pause", "paused: stopped %d members, data and identities kept", changed)
	} else {
		r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonResuming, "Resume", "resuming %d members with their data", changed)
	}
	return true, nil
}

// recordIdentities writes each member's etcd ID and role into its status, with the etcd
// version it reports. Only a member whose identity changed is written, and a merge patch
// carries only the fields that did: a member that did not answer in this look reports no
// version, and keeps the one recorded.
func (r *Reconciler) recordIdentities(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	for _, m := range v.members {
		em, ok := v.etcdMemberFor(c, m)
		if !ok {
			continue
		}
		want := identityOf(m, em, v)
		if want == recordedIdentity(m) {
			continue
		}
		patch := client.MergeFrom(m.DeepCopy())
		m.Status.MemberID, m.Status.Role, m.Status.ClusterID, m.Status.Version = want.memberID, want.role, want.clusterID, want.version
		m.Status.Joined = want.joined
		if err := r.Status().Patch(ctx, m, patch); err != nil {
			return true, kit.IgnoreConflict(err)
		}
	}
	return false, nil
}

// memberIdentity is what recordIdentities keeps of a member in its status.
type memberIdentity struct {
	memberID, clusterID, version string
	role                         etcdv1.MemberRole
	joined                       bool
}

// identityOf is m's identity as etcd gives it in this look (em is m in etcd's member list);
// a version m did not report leaves the recorded one. joined (status.joined) is set once etcd
// lists m started and never cleared: the member controller holds such a member to its data
// even when etcd cannot be asked (member.mustHaveData). Written at the first look that sees
// m started, it may come after m lost its Pod and data; until m is promoted that is
// harmless (a learner started empty with its peers named under its ID counts toward no
// commit and catches up from them), and the write that must come first, before the
// promotion, is recordJoined's.
func identityOf(m *etcdv1.EtcdMember, em etcd.Member, v *clusterView) memberIdentity {
	role := etcdv1.RoleVoter
	if em.IsLearner {
		role = etcdv1.RoleLearner
	}
	return memberIdentity{memberID: em.IDHex(), clusterID: etcd.FormatID(v.clusterID), version: cmp.Or(v.versions[em.ID], m.Status.Version), role: role,
		joined: m.Status.Joined || em.IsStarted()}
}

func recordedIdentity(m *etcdv1.EtcdMember) memberIdentity {
	return memberIdentity{memberID: m.Status.MemberID, clusterID: m.Status.ClusterID, version: m.Status.Version, role: m.Status.Role, joined: m.Status.Joined}
}

// recordJoined writes status.joined of a member etcd lists as started, if it is not written
// yet. promoteLearners calls it before it asks etcd to promote the member, and the write must
// come first: from the promotion on, etcd may count the member as a voter while its status
// still says learner (the next look records the role); were the operator to crash in between
// and the member's Pod go with its data while etcd cannot be asked, a member with neither the
// role nor the mark recorded would count as a learner that never ran, and be started on empty
// data with its peers named under a voter's ID. The other order leaves, after a crash, only a
// mark on a member that did start, which is true.
func (r *Reconciler) recordJoined(ctx context.Context, m *etcdv1.EtcdMember) error {
	if m.Status.Joined {
		return nil
	}
	patch := client.MergeFrom(m.DeepCopy())
	m.Status.Joined = true
	return r.Status().Patch(ctx, m, patch)
}

// removeOrphanLearners removes learners that were added for a member that no longer exists
// (the operator died between deciding and recording). A learner holds no data others need.
func (r *Reconciler) removeOrphanLearners(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	for _, em := range v.learners() {
		if v.ownerOf(c, em) != nil {
			continue
		}
		if err := v.etcd.Remove(ctx, em.ID); err != nil && !errors.Is(err, etcd.ErrMemberNotFound) {
			return true, err
		}
		r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonOrphanLearnerRemoved, "RemoveMember", "removed learner %s (%v) that no EtcdMember owns", em.IDHex(), em.PeerURLs)
		return true, nil
	}
	return false, nil
}

// addPending adds, as a learner, a member created to join the cluster but not yet in etcd.
// Looking the peer URL up first (etcdMemberFor) makes a retried add a no-op.
func (r *Reconciler) addPending(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	if len(v.learners()) > 0 {
		// etcd takes one learner at a time: another member waits until this one is
		// promoted, which promoteLearners does next.
		return false, nil
	}
	for _, m := range v.active() {
		if m.Spec.Bootstrap.InitialClusterState != etcdv1.InitialClusterStateExisting {
			continue
		}
		if _, ok := v.etcdMemberFor(c, m); ok {
			continue
		}
		if m.Status.MemberID != "" {
			continue // it was in etcd and is gone: replaceDamaged replaces it
		}
		if err := membershipBlocked(wantVersion(c), v.runningVersions()); err != nil {
			return false, err
		}
		added, _, err := v.etcd.AddLearner(ctx, []string{specs.PeerURL(c, m.Name)})
		if errors.Is(err, etcd.ErrUnhealthyCluster) {
			total, healthy := v.voters()
			return true, addRefused(m.Name, total, healthy)
		}
		if err != nil {
			return true, fmt.Errorf("adding %s as a learner: %w", m.Name, err)
		}
		failpoint.Crash(c, failpoint.AfterAddLearner)
		r.eventAbout(ctx, c, m, corev1.EventTypeNormal, etcdv1.ReasonMemberAdded, "AddMember", "added %s as learner %s", m.Name, added.IDHex())
		patch := client.MergeFrom(m.DeepCopy())
		m.Status.MemberID, m.Status.Role = added.IDHex(), etcdv1.RoleLearner
		return true, r.Status().Patch(ctx, m, patch)
	}
	return false, nil
}

// foundingWait is the wait for the founding members to form the cluster. While all their
// Pods run, they are electing a leader, which no object the operator watches reports: looked
// at again every second (in motion). While one is not running yet (not scheduled, its image
// pulled, its volume attached), its start is a Pod change, which wakes the cluster: looked at
// again only at the resync, so that clusters whose Pods cannot be scheduled do not keep the
// workers busy (200 clusters, 8 of them unschedulable, were 8 looks a second).
func foundingWait(names []string, pods map[string]*corev1.Pod) error {
	w := kit.Waiting{Reason: etcdv1.ReasonBootstrapping, Message: fmt.Sprintf("waiting for the founding members %s to form the cluster", strings.Join(names, ", "))}
	for _, name := range names {
		if pod := pods[name]; pod == nil || pod.Status.Phase != corev1.PodRunning {
			w.RetryIn = resyncPeriod
			w.Message += fmt.Sprintf("; %s has not started yet", name)
			break
		}
	}
	return w
}

// addRefused is the wait after etcd refused a learner as unhealthy. With its strict
// reconfiguration check, etcd takes a new member only once its leader has been connected to
// every voter for the last 5 s (etcd's HealthInterval): just after a promotion or a member's
// restart that wait ends by itself, at a moment no object the operator watches reports. So
// while every voter answers it is work in motion, asked again every addRefusedPoll (a refused
// add costs etcd one membership read; a second between asks cost a scale-out right after a
// lost Pod half a second on average), not a failure to back off from (which cost a scale-out
// step 8 s). With a voter down it is a failure: the backoff applies.
func addRefused(member string, total, healthy int) error {
	if healthy == total {
		return kit.Waiting{Reason: etcdv1.ReasonScaling, RetryIn: addRefusedPoll,
			Message: fmt.Sprintf("etcd does not take %s yet: its leader has not been connected to every voter for 5 s", member)}
	}
	return waitFor(etcdv1.ReasonMembersUnhealthy, "not adding %s: etcd calls the cluster unhealthy, %d of %d voters healthy", member, healthy, total)
}

// addRefusedPoll is how often an add etcd refused while every voter is healthy is tried again.
const addRefusedPoll = 250 * time.Millisecond

// catchUpPoll is how often a learner that is catching up is asked to be promoted: a new
// member of a small cluster catches up within a second of its start, and each look the
// scale-out waits beyond that adds to every learner step.
const catchUpPoll = 100 * time.Millisecond

// catchingUp is the wait for a learner etcd will not promote yet.
func catchingUp(name string) error {
	return kit.Waiting{Reason: etcdv1.ReasonScaling, RetryIn: catchUpPoll, Message: fmt.Sprintf("learner %s is catching up", name)}
}

// promoteLearners promotes a started learner once etcd says it has caught up, if the quorum
// of the larger voter set is healthy. In the same look, first, its Pod is made to refuse an
// empty data directory (requireDataInPlace): never is a learner promoted whose Pod would let
// it rejoin on empty data under its ID.
func (r *Reconciler) promoteLearners(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	for _, em := range v.learners() {
		owner := v.ownerOf(c, em)
		if owner == nil || !em.IsStarted() || !owner.DeletionTimestamp.IsZero() {
			continue
		}
		total, healthy := v.voters()
		if healthy+1 < etcd.Quorum(total+1) {
			return true, waitFor(etcdv1.ReasonMembersUnhealthy, "not promoting %s: %d of %d voters healthy", owner.Name, healthy, total)
		}
		if err := membershipBlocked(wantVersion(c), v.runningVersions()); err != nil {
			return false, err
		}
		// A learner's acks count toward no commit, so its Pod may name its peers until now;
		// a voter's must not (requireDataInPlace).
		if _, err := r.requireDataInPlace(ctx, c, owner, v.pods[owner.Name]); err != nil {
			return true, fmt.Errorf("not promoting %s: %w", owner.Name, err)
		}
		// Before the promotion, never after it (recordJoined says why).
		if err := r.recordJoined(ctx, owner); err != nil {
			return true, fmt.Errorf("not promoting %s: recording that it joined: %w", owner.Name, err)
		}
		// The leader this look saw answer is asked alone whether it still leads: a catch-up
		// poll then costs the leader one status, not every member one.
		err := v.etcd.Promote(ctx, em.ID, v.leaderEndpoint())
		if errors.Is(err, etcd.ErrLearnerNotReady) {
			return true, catchingUp(owner.Name)
		}
		if err != nil {
			return true, fmt.Errorf("promoting %s: %w", owner.Name, err)
		}
		failpoint.Crash(c, failpoint.AfterPromote)
		r.eventAbout(ctx, c, owner, corev1.EventTypeNormal, etcdv1.ReasonMemberPromoted, "PromoteMember", "promoted %s (%s) to voter", owner.Name, em.IDHex())
		return true, nil
	}
	return false, nil
}
