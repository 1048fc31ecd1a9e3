package cluster

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/retention"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// clusterView is what one reconcile knows: the EtcdMembers and, when etcd answers, its member
// list and each member's health. Decisions are taken on this view only, and at most one
// membership change is made per reconcile.
type clusterView struct {
	members     []*etcdv1.EtcdMember // sorted by ordinal
	etcd        etcd.Client          // nil when there is nothing to talk to
	reachable   bool
	clusterID   uint64
	etcdMembers []etcd.Member
	healthy     map[uint64]bool
	// stopped are the members etcd lists whose etcd, by what the cache holds of their Pods,
	// does not run (etcdStopped): they were not asked, and count as not answering.
	stopped  map[uint64]bool
	leader   uint64
	versions map[uint64]string
	// statuses is what each member that answered said of itself in this look (its raft
	// applied index for an upgrade's catch-up check, among others).
	statuses  map[uint64]etcd.Status
	clientErr error // why no client could be opened, e.g. etcd.ErrAuthFailed
	// restoreFailure is why the bootstrap snapshot could not be restored ("" when it was not).
	restoreFailure string
	// restoreProgress is where the founding member's restore is (restoreProgress).
	restoreProgress string
	// restoreSource is what the founding member of a restored cluster is to restore, while it
	// is still to be created; nil otherwise, or when restoreFailure says why it cannot be.
	restoreSource *etcdv1.MemberRestore
	// pvcs and pods are the cluster's PVCs and Pods by name, from the cache: with etcd's
	// member list they say where each member's data lives and whether it is still there.
	pvcs map[string]*corev1.PersistentVolumeClaim
	pods map[string]*corev1.Pod
	// discarded are the PVCs that hold the data of members a quorum-loss recovery
	// discarded: kept, but no member's, so they are not in pvcs (discarded.go).
	discarded []*corev1.PersistentVolumeClaim
	// caRotation is the CARotation condition a waiting CA rotation says (rotateCAs); nil
	// when it recorded its own or there is none.
	caRotation *metav1.Condition
	// caRotationStatus is a first record of the CAs members trust (noteOwnCAs), written with
	// the status; nil otherwise.
	caRotationStatus *etcdv1.CARotationStatus
	// caRotationRetry is how soon a CA rotation waiting on what sends no event (the kubelet
	// updating Secret volumes, a member serving the re-issued certificate) looks again; 0: none.
	caRotationRetry time.Duration
	// discardedCondition is the DiscardedDataKept condition releaseDiscardedData decided
	// (nil: none kept), and discardedRetry when the next kept PVC is due (0: none).
	discardedCondition *metav1.Condition
	discardedRetry     time.Duration
	// alarms are etcd's alarms, listed once per reconcile for both the replacement of a
	// corrupt member and the Alarm condition; alarmsKnown is false when they could not be read.
	alarms      []etcd.Alarm
	alarmsKnown bool
	// corrupt are the members etcd raised a CORRUPT alarm for.
	corrupt map[uint64]bool
	// survivors is what each member still says about itself when the member list cannot
	// be read (no quorum): serializable Status answers, for the QuorumLost report.
	survivors []survivor
	// nodeLoss are the members etcd lists that do not answer and whose data is pinned to a
	// Node that no longer exists (observeNodeLoss), by name.
	nodeLoss map[string]lostNode
	// volumes is the VolumesResized condition the volumes component decided; nil leaves it
	// as it is.
	volumes *metav1.Condition
	// loss is the grace clock of spec.quorumLoss as this look leaves it (quorumLoss); nil
	// until asked.
	loss *quorumLossCount
}

// childFacts are what the components under children are given of the view. Reconcile takes
// them once, after the look: only observe sets the members, the PVCs and etcd's member list
// (what a step writes to a member, the Facts share).
func (v *clusterView) childFacts() kit.Facts {
	voters, _ := v.voters()
	legacy := false
	for _, pod := range v.pods {
		legacy = legacy || specs.HasLegacyRoleLabel(pod.Labels)
	}
	return kit.Facts{Voters: voters, Members: v.members, PVCs: v.pvcs, LegacyRoleLabels: legacy}
}

// answeredNot: a client was opened and no member answered through it.
func (v *clusterView) answeredNot() bool { return v.etcd != nil && !v.reachable }

func (v *clusterView) close() {
	if v.etcd != nil {
		_ = v.etcd.Close()
	}
}

func (r *Reconciler) listMembers(ctx context.Context, c *etcdv1.EtcdCluster) ([]*etcdv1.EtcdMember, error) {
	return listMembersFrom(ctx, r.Client, c)
}

// listMembersFrom lists the cluster's EtcdMembers through reader (the cache, or the API
// itself where a decision must not rest on a cache that may be behind).
func listMembersFrom(ctx context.Context, reader client.Reader, c *etcdv1.EtcdCluster) ([]*etcdv1.EtcdMember, error) {
	list := &etcdv1.EtcdMemberList{}
	if err := reader.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelCluster: c.Name}); err != nil {
		return nil, err
	}
	members := make([]*etcdv1.EtcdMember, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].Spec.ClusterName == c.Name {
			members = append(members, &list.Items[i])
		}
	}
	slices.SortFunc(members, func(a, b *etcdv1.EtcdMember) int { return byOrdinal(a.Name, b.Name) })
	return members, nil
}

// byOrdinal orders member names by the number at their end, names the operator did not make
// (adopted members) last and among themselves by name: every decision that takes "the first"
// or "the last" member takes the same one on every reconcile.
func byOrdinal(a, b string) int {
	if c := cmp.Compare(ordinal(a), ordinal(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// ordinal is the number at the end of a member's name; names the operator did not make sort
// last.
func ordinal(name string) int {
	i := strings.LastIndex(name, "-")
	n, err := strconv.Atoi(name[i+1:])
	if i < 0 || err != nil {
		return 1 << 30
	}
	return n
}

// observe asks etcd, through every member that should be running, for the member list and
// each member's health. An unreachable etcd is a fact of the view, not an error.
func (r *Reconciler) observe(ctx context.Context, c *etcdv1.EtcdCluster, members []*etcdv1.EtcdMember) (*clusterView, error) {
	view := &clusterView{members: members, healthy: map[uint64]bool{}, versions: map[uint64]string{}, statuses: map[uint64]etcd.Status{}, corrupt: map[uint64]bool{}}
	if err := r.observeObjects(ctx, c, view); err != nil {
		return nil, err
	}
	view.restoreFailure = restoreFailure(c, members, view.pods)
	view.restoreProgress = restoreProgress(c, members, view.pods)
	src, unusable, err := r.observeRestore(ctx, c, members)
	if err != nil {
		return nil, err
	}
	view.restoreSource = src
	if view.restoreFailure == "" {
		view.restoreFailure = unusable
	}
	endpoints := runningEndpoints(c, members)
	if len(endpoints) == 0 && ptrOr(c.Spec.Replicas, 3) > 0 {
		// Every EtcdMember is gone or going (kubectl delete etcdmembers --all): ask whatever
		// else may still run, found through the PVCs, the Pods and the last status. A paused
		// cluster has nothing running to ask.
		endpoints = survivingEndpoints(c, view)
	}
	if len(endpoints) == 0 {
		return view, nil
	}
	cli, err := r.openClient(ctx, c, endpoints)
	if err != nil {
		view.clientErr = err
		return view, nil
	}
	view.etcd = cli
	listCtx, cancel := context.WithTimeout(ctx, memberListTimeout(c))
	defer cancel()
	clusterID, list, err := cli.MemberList(listCtx)
	if err != nil {
		if c.Status.ClusterID != "" {
			view.survivors = askSurvivors(ctx, cli, c, view)
		}
		return view, nil
	}
	view.reachable, view.clusterID, view.etcdMembers = true, clusterID, list
	view.alarms, view.alarmsKnown = listAlarms(ctx, cli)
	view.corrupt = corruptMembers(view.alarms)
	view.stopped = view.stoppedMembers(c)
	observations := make([]memberObservation, len(list))
	var wg sync.WaitGroup
	for i, m := range list {
		if view.stopped[m.ID] {
			continue // nothing runs to answer: asking would wait out the timeout
		}
		pod := view.podOf(c, m)
		askCtx, cancel := r.askContext(ctx, pod)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			observations[i] = observeMember(askCtx, cli, m, askTimeout(pod))
		}()
	}
	wg.Wait()
	for i, o := range observations {
		view.record(list[i], o)
	}
	return view, r.observeNodeLoss(ctx, c, view)
}

// memberListTimeout is short while the founding members are still forming the cluster: until
// they have a leader, the call can only time out, and a long wait would delay noticing that
// they formed it.
func memberListTimeout(c *etcdv1.EtcdCluster) time.Duration {
	if c.Status.ClusterID == "" {
		return time.Second
	}
	return 5 * time.Second
}

// stoppedMembers are the members etcd lists whose EtcdMember's etcd does not run, by what the
// cache holds of its Pod (etcdStopped).
func (v *clusterView) stoppedMembers(c *etcdv1.EtcdCluster) map[uint64]bool {
	stopped := map[uint64]bool{}
	for _, m := range v.members {
		if em, ok := v.etcdMemberFor(c, m); ok && etcdStopped(m, v.pods[m.Name]) {
			stopped[em.ID] = true
		}
	}
	return stopped
}

// etcdStopped: no etcd of m runs, by what is known of its Pod, so there is nothing to ask. Its
// Pod says etcd does not run in it (kit.EtcdStopped: not started yet, in a back-off after an
// exit), or the Pod it ran in is gone (its status still names one) and the next is not
// there yet. Asked anyway, such a member costs a look the whole wait for its answer (gRPC waits
// for a connection until the deadline, 3 s), and the look that would have seen it exit on
// its data with it; the Pod's next change brings the look that asks it again. A Pod of
// another operator's, not adopted yet, need not carry the labels the view finds Pods by: its
// absence says nothing.
func etcdStopped(m *etcdv1.EtcdMember, pod *corev1.Pod) bool {
	if pod == nil {
		return m.Status.PodName != "" && m.Spec.Adopted == nil && !m.AdoptionPending()
	}
	return kit.EtcdStopped(pod)
}

// memberObservation is what one member says about itself.
type memberObservation struct {
	answered bool
	status   etcd.Status
	healthy  bool
}

// How long a look waits for one member's answer. A member whose Pod serves (Ready, not being
// deleted) is given the time a loaded etcd may need. One whose Pod is not Ready is starting,
// or exiting again, and one whose Pod is being deleted is stopping: etcd answers within
// milliseconds once it listens, while a process that exits keeps the client retrying until
// the deadline. The look that a wiped member's Pod deletion brought asked the old Pod's etcd
// as it stopped and waited the whole 3 s, and the replacement decided on the new Pod's first
// exit came that much later.
const (
	askReady    = 3 * time.Second
	askStarting = time.Second
)

// askTimeout is how long a look waits for the member whose Pod is pod (nil when the look has
// none).
func askTimeout(pod *corev1.Pod) time.Duration {
	if podServes(pod) {
		return askReady
	}
	return askStarting
}

// podOf is the Pod of the EtcdMember that em is, nil when the look has none.
func (v *clusterView) podOf(c *etcdv1.EtcdCluster, em etcd.Member) *corev1.Pod {
	if m := v.ownerOf(c, em); m != nil {
		return v.pods[m.Name]
	}
	return nil
}

// observeMember asks one member for its status and health, waiting at most wait; members are
// asked in parallel, so one that hangs costs a reconcile one timeout, not one per member.
func observeMember(ctx context.Context, cli etcd.Client, m etcd.Member, wait time.Duration) memberObservation {
	if !m.IsStarted() || len(m.ClientURLs) == 0 {
		return memberObservation{}
	}
	checkCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	status, err := cli.Status(checkCtx, m.ClientURLs[0])
	if err != nil {
		return memberObservation{}
	}
	if m.IsLearner {
		// A learner serves no quorum reads; answering Status is its health.
		return memberObservation{answered: true, status: status, healthy: true}
	}
	return memberObservation{answered: true, status: status, healthy: cli.Healthy(checkCtx, m.ClientURLs[0]) == nil}
}

func (v *clusterView) record(m etcd.Member, o memberObservation) {
	if !o.answered {
		return
	}
	v.versions[m.ID] = o.status.Version
	v.statuses[m.ID] = o.status
	if o.status.Leader != 0 {
		v.leader = o.status.Leader
	}
	v.healthy[m.ID] = o.healthy
}

// runningEndpoints are the client URLs of members that should have a Pod.
func runningEndpoints(c *etcdv1.EtcdCluster, members []*etcdv1.EtcdMember) []string {
	var endpoints []string
	for _, m := range members {
		if !m.Spec.Dormant && m.DeletionTimestamp.IsZero() {
			endpoints = append(endpoints, specs.ClientURL(c, m.Name))
		}
	}
	return endpoints
}

// etcdMemberFor finds the etcd member behind an EtcdMember: by recorded ID, by name, or by
// peer URL (a learner added but not started yet has no name).
func (v *clusterView) etcdMemberFor(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) (etcd.Member, bool) {
	peerURL := specs.PeerURL(c, m.Name)
	for _, em := range v.etcdMembers {
		if em.IDHex() == m.Status.MemberID || em.Name == m.Name || contains(em.PeerURLs, peerURL) {
			return em, true
		}
	}
	return etcd.Member{}, false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// voters counts voting members and how many of them are healthy.
func (v *clusterView) voters() (total, healthy int) {
	for _, m := range v.etcdMembers {
		if m.IsLearner {
			continue
		}
		total++
		if v.healthy[m.ID] {
			healthy++
		}
	}
	return total, healthy
}

// leaderEndpoint is the client URL at which the leader answered in this look, "" when no
// member named a leader or the leader itself did not answer.
func (v *clusterView) leaderEndpoint() string {
	if _, answered := v.statuses[v.leader]; !answered || v.leader == 0 {
		return ""
	}
	for _, em := range v.etcdMembers {
		if em.ID == v.leader && len(em.ClientURLs) > 0 {
			return em.ClientURLs[0]
		}
	}
	return ""
}

func (v *clusterView) learners() []etcd.Member {
	var out []etcd.Member
	for _, m := range v.etcdMembers {
		if m.IsLearner {
			out = append(out, m)
		}
	}
	return out
}

// active are the members that are not being removed.
func (v *clusterView) active() []*etcdv1.EtcdMember {
	var out []*etcdv1.EtcdMember
	for _, m := range v.members {
		if m.DeletionTimestamp.IsZero() {
			out = append(out, m)
		}
	}
	return out
}

// observeObjects lists the cluster's PVCs and Pods from the cache.
func (r *Reconciler) observeObjects(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) error {
	sel := []client.ListOption{client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelCluster: c.Name}}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, pvcs, sel...); err != nil {
		return err
	}
	v.pvcs = map[string]*corev1.PersistentVolumeClaim{}
	v.discarded = nil
	for i := range pvcs.Items {
		if retention.DiscardedData(&pvcs.Items[i]) {
			// Kept data is no member's; only the operator's own (pvcOfCluster) is reported
			// and, by the policy, released.
			if pvcOfCluster(&pvcs.Items[i], c) {
				v.discarded = append(v.discarded, &pvcs.Items[i])
			}
			continue
		}
		v.pvcs[pvcMember(&pvcs.Items[i])] = &pvcs.Items[i]
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, sel...); err != nil {
		return err
	}
	v.pods = map[string]*corev1.Pod{}
	for i := range pods.Items {
		v.pods[pods.Items[i].Name] = &pods.Items[i]
	}
	return nil
}

// knownMemberNames are every member name that may still have a running etcd: EtcdMembers
// (also those being deleted), PVCs, Pods and the last status.
func knownMemberNames(c *etcdv1.EtcdCluster, v *clusterView) []string {
	seen := map[string]bool{}
	for _, m := range v.members {
		seen[m.Name] = true
	}
	for name := range v.pvcs {
		seen[name] = true
	}
	for name := range v.pods {
		seen[name] = true
	}
	for _, m := range c.Status.Members {
		seen[m.Name] = true
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	slices.SortFunc(out, byOrdinal)
	return out
}

// survivingEndpoints are the client URLs of every member that may still run.
func survivingEndpoints(c *etcdv1.EtcdCluster, v *clusterView) []string {
	var out []string
	for _, name := range knownMemberNames(c, v) {
		out = append(out, specs.ClientURL(c, name))
	}
	return out
}

func (v *clusterView) facts(c *etcdv1.EtcdCluster) []memberFacts {
	out := make([]memberFacts, 0, len(v.members))
	for _, m := range v.members {
		f := memberFacts{
			name:     m.Name,
			memory:   m.Spec.Storage.Medium == etcdv1.StorageMediumMemory,
			asked:    m.Annotations[etcdv1.AnnotationReplace] == "true",
			deleting: !m.DeletionTimestamp.IsZero() || m.Spec.Dormant,
			recorded: m.Status.MemberID != "",
		}
		if pvc := v.pvcs[m.Name]; pvc != nil && pvc.DeletionTimestamp.IsZero() {
			f.pvcPresent = true
		}
		if pod := v.pods[m.Name]; pod != nil && pod.DeletionTimestamp.IsZero() {
			f.podPresent = true
			f.dataError = kit.DataError(pod)
		}
		if em, ok := v.etcdMemberFor(c, m); ok {
			f.id, f.inEtcd, f.started = em.ID, true, em.IsStarted()
			f.healthy, f.corrupt = v.healthy[em.ID], v.corrupt[em.ID]
		}
		out = append(out, f)
	}
	return out
}

func (v *clusterView) etcdMemberNamed(name string) bool {
	for _, em := range v.etcdMembers {
		if em.Name == name {
			return true
		}
	}
	return false
}

// ownerOf is the EtcdMember behind an etcd member, if any.
func (v *clusterView) ownerOf(c *etcdv1.EtcdCluster, em etcd.Member) *etcdv1.EtcdMember {
	for _, m := range v.members {
		if found, ok := v.etcdMemberFor(c, m); ok && found.ID == em.ID {
			return m
		}
	}
	return nil
}

func (v *clusterView) etcdMemberByID(id uint64) (etcd.Member, bool) {
	for _, em := range v.etcdMembers {
		if em.ID == id {
			return em, true
		}
	}
	return etcd.Member{}, false
}
