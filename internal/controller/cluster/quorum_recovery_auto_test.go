package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func TestDecideAutoRecovery(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	auto := &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember, GracePeriodSeconds: ptrTo[int32](60)}
	lostAgo := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-d)} }
	voter := func(name string, applied, term uint64) survivor {
		return survivor{name: name, answered: true, status: etcd.Status{RaftAppliedIndex: applied, RaftTerm: term}}
	}
	two := []survivor{voter("db-1", 90, 3), voter("db-3", 100, 3), {name: "db-2"}}
	for _, tc := range []struct {
		name      string
		policy    *etcdv1.QuorumLossPolicy
		since     *metav1.Time
		survivors []survivor
		source    string
		wait      time.Duration
		why       string
	}{
		{"no policy", nil, lostAgo(time.Hour), two, "", 0, ""},
		{"Manual", &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossManual}, lostAgo(time.Hour), two, "", 0, ""},
		{"no loss counted (paused, members starting, or not looked at yet)", auto, nil, two, "", 0, ""},
		{"within the grace period", auto, lostAgo(20 * time.Second), two, "", 40 * time.Second, "recovers from the most advanced member at 2026-01-01T12:00:40Z"},
		{"default grace of 300 s", &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember}, lostAgo(100 * time.Second), two, "", 200 * time.Second, "unless the quorum comes back first"},
		{"past the grace period", auto, lostAgo(61 * time.Second), two, "db-3", 0, ""},
		{"no survivor", auto, lostAgo(time.Hour), []survivor{{name: "db-1"}, {name: "db-2"}}, "", 0, "no member answers as a voter"},
		{"a learner only", auto, lostAgo(time.Hour), []survivor{answered("db-4", 500, true)}, "", 0, "no member answers as a voter"},
		{"a learner ahead of the voters", auto, lostAgo(time.Hour), append([]survivor{answered("db-4", 500, true)}, two...), "db-3", 0, ""},
		{"a tie goes to the higher term", auto, lostAgo(time.Hour), []survivor{voter("db-1", 100, 3), voter("db-2", 100, 4)}, "db-2", 0, ""},
		{"a full tie goes to the lowest ordinal", auto, lostAgo(time.Hour), []survivor{voter("db-3", 100, 3), voter("db-1", 100, 3)}, "db-1", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideAutoRecovery(tc.policy, tc.since, tc.survivors, now)
			if d.source != tc.source || d.wait != tc.wait || (tc.why == "") != (d.why == "") || !strings.Contains(d.why, tc.why) {
				t.Fatalf("got %+v, want source %q, wait %s, why %q", d, tc.source, tc.wait, tc.why)
			}
		})
	}
}

// The policy asks for the recovery from the most advanced survivor once the grace period has
// passed, through the recover-from annotation, and not before; the recovery then states what
// is lost before any act, as for a person's request.
func TestAutomaticRecoveryAfterTheGracePeriod(t *testing.T) {
	h := runningHarness(t)
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) {
		s.QuorumLoss = &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember, GracePeriodSeconds: ptrTo[int32](60)}
	})
	h.startPodOf("db-1")
	h.etcd.SetDown(h.etcdID("db-2"), true)
	h.etcd.SetDown(h.etcdID("db-3"), true)
	h.reconcile() // the loss is recorded
	h.reconcile()
	if from := h.clusterObj().Annotations[etcdv1.AnnotationRecoverFrom]; from != "" {
		t.Fatalf("recovery asked for within the grace period: %s", from)
	}
	if av := h.condition(etcdv1.ConditionAvailable); av.Reason != etcdv1.ReasonQuorumLost {
		t.Fatalf("Available %+v", av)
	}
	if pr := h.condition(etcdv1.ConditionProgressing); !strings.Contains(pr.Message, "spec.quorumLoss.policy RecoverFromMostAdvancedMember recovers from the most advanced member at") {
		t.Fatalf("Progressing does not say when the policy acts: %+v", pr)
	}
	h.r.Now = func() time.Time { return time.Now().Add(61 * time.Second) }
	h.reconcile()
	if from := h.clusterObj().Annotations[etcdv1.AnnotationRecoverFrom]; from != "db-1" {
		t.Fatalf("recover-from %q after the grace period, want db-1", from)
	}
	h.reconcile()
	if pr := h.condition(etcdv1.ConditionProgressing); pr.Reason != etcdv1.ReasonQuorumRecovery || !strings.Contains(pr.Message, "recovering from member db-1") || len(h.members()) != 3 {
		t.Fatalf("the automatic request did not state the loss first: %+v", pr)
	}
}

// The operator cut off from two members of three whose Pods stay Ready (a partition with the
// operator on the minority side): they serve with a quorum the operator cannot see, so no
// loss is counted and nothing is recovered however long it lasts, and the status says why.
// Once their Pods are no longer Ready (the loss is real), the count starts.
func TestAutomaticRecoveryNotWhileTheMembersOutOfReachServe(t *testing.T) {
	h := runningHarness(t)
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) {
		s.QuorumLoss = &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember, GracePeriodSeconds: ptrTo[int32](60)}
	})
	h.setPod("db-1", corev1.PodRunning, true)
	h.startPodOf("db-2")
	h.startPodOf("db-3")
	h.etcd.SetDown(h.etcdID("db-2"), true)
	h.etcd.SetDown(h.etcdID("db-3"), true)
	for _, later := range []time.Duration{0, time.Minute, time.Hour} {
		h.r.Now = func() time.Time { return time.Now().Add(later) }
		h.reconcile()
		h.reconcile()
		if from := h.clusterObj().Annotations[etcdv1.AnnotationRecoverFrom]; from != "" {
			t.Fatalf("%s on: recovery from %s asked while the members out of reach serve", later, from)
		}
		if since := h.clusterObj().Status.QuorumLostSince; since != nil {
			t.Fatalf("%s on: the loss counted since %s", later, since)
		}
	}
	if pr := h.condition(etcdv1.ConditionProgressing); !strings.Contains(pr.Message, "members [db-2, db-3] do not answer the operator, but their Pods are Ready") {
		t.Fatalf("Progressing does not say why nothing is recovered: %+v", pr)
	}
	h.setPod("db-2", corev1.PodRunning, true)
	h.setPod("db-3", corev1.PodRunning, true)
	h.reconcile()
	if since := h.clusterObj().Status.QuorumLostSince; since == nil {
		t.Fatal("the loss is not counted once the members' Pods are not Ready")
	}
}

// The grace clock counts from the loss of a quorum that was expected, look by look: not from
// an earlier False reason (Paused, Unreachable), not while members that could complete the
// quorum are still starting, and not while members the operator cannot reach serve with a
// quorum by their Pods' readiness (the operator on the minority side of a partition).
func TestQuorumLossClock(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	up, down, starting := lossVoter{answered: true}, lossVoter{}, lossVoter{starting: true}
	servingUnseen, servingSeen := lossVoter{serving: true}, lossVoter{answered: true, serving: true}
	joining := lossVoter{joining: true}
	type look struct {
		at      time.Duration // after t0
		missing bool
		voters  []lossVoter
		since   time.Duration // after t0; -1: no count
	}
	for _, tc := range []struct {
		name  string
		looks []look
	}{
		{"a loss from serving counts from its first look, kept after", []look{
			{0, false, nil, -1},
			{10 * time.Second, true, []lossVoter{up, down, down}, 10 * time.Second},
			{time.Hour, true, []lossVoter{up, down, down}, 10 * time.Second},
		}},
		{"paused longer than the grace, resumed, members starting: no count until they are up", []look{
			{0, false, nil, -1}, // Paused
			{time.Hour, true, []lossVoter{starting, starting, starting}, -1},
			{time.Hour + 10*time.Second, true, []lossVoter{up, starting, starting}, -1},
			{time.Hour + 20*time.Second, true, []lossVoter{up, down, down}, time.Hour + 20*time.Second},
		}},
		{"unreachable, then the quorum missing: counts from the loss", []look{
			{0, false, []lossVoter{down, down, down}, -1}, // Unreachable: no client
			{time.Hour, true, []lossVoter{up, down, down}, time.Hour},
		}},
		{"a member starting that can complete the quorum ends the count", []look{
			{0, true, []lossVoter{up, down, down}, 0},
			{time.Minute, true, []lossVoter{up, starting, down}, -1},
			{2 * time.Minute, true, []lossVoter{up, down, down}, 2 * time.Minute},
		}},
		{"members starting that cannot complete the quorum do not stop it", []look{
			{0, true, []lossVoter{down, down, down, down, down}, 0},
			{time.Minute, true, []lossVoter{up, starting, down, down, down}, 0},
		}},
		{"resumed: members up wait for a peer still attaching its volume: no count", []look{
			{0, false, nil, -1}, // Paused
			{time.Hour, true, []lossVoter{joining, joining, starting}, -1},
			{time.Hour + time.Minute, true, []lossVoter{joining, down, starting}, -1},
		}},
		{"members up together that form no quorum count", []look{
			{0, true, []lossVoter{joining, joining, starting}, -1},
			{time.Minute, true, []lossVoter{joining, joining, joining}, time.Minute},
		}},
		{"one member up waiting, its peers without Pods: counts", []look{
			{0, true, []lossVoter{joining, down, down}, 0},
		}},
		{"a quorum of members answering that name a leader: no count", []look{
			{0, true, []lossVoter{servingSeen, servingSeen, down}, -1},
		}},
		{"a quorum of members answering that form none still counts", []look{
			{0, true, []lossVoter{up, up, down}, 0},
		}},
		{"the operator cut off from a majority whose Pods are Ready: no count, for any time", []look{
			{0, true, []lossVoter{up, servingUnseen, servingUnseen}, -1},
			{time.Hour, true, []lossVoter{up, servingUnseen, servingUnseen}, -1},
		}},
		{"a Ready member the operator sees counts once", []look{
			{0, true, []lossVoter{servingSeen, down, down}, 0},
		}},
		{"one Ready member out of reach completes no quorum with one that answers: counts", []look{
			{0, true, []lossVoter{up, servingUnseen, down, down, down}, 0},
		}},
		{"the majority's Pods turning not Ready (a loss after all) starts the count then", []look{
			{0, true, []lossVoter{up, servingUnseen, servingUnseen}, -1},
			{time.Minute, true, []lossVoter{up, down, down}, time.Minute},
		}},
		{"the quorum back ends the count", []look{
			{0, true, []lossVoter{up, down, down}, 0},
			{time.Minute, false, nil, -1},
			{2 * time.Minute, true, []lossVoter{up, down, down}, 2 * time.Minute},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var since *metav1.Time
			for i, l := range tc.looks {
				since = quorumLossClock(since, l.missing, l.voters, t0.Add(l.at))
				switch {
				case l.since < 0 && since != nil:
					t.Fatalf("look %d: counting since %s, want no count", i, since.Time)
				case l.since >= 0 && (since == nil || !since.Time.Equal(t0.Add(l.since))):
					t.Fatalf("look %d: since %v, want %s", i, since, t0.Add(l.since))
				}
			}
		})
	}
}

func TestMemberStarting(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	probe := &corev1.Probe{PeriodSeconds: 2, FailureThreshold: 150} // 300 s to come up
	pod := func(phase corev1.PodPhase, started bool, restarts int32, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: specs.ContainerName, StartupProbe: probe}}},
			Status: corev1.PodStatus{Phase: phase, Conditions: conds, ContainerStatuses: []corev1.ContainerStatus{
				{Name: specs.ContainerName, Started: &started, RestartCount: restarts},
			}}}
	}
	stuck := pod(corev1.PodPending, false, 0)
	stuck.CreationTimestamp = metav1.NewTime(now.Add(-301 * time.Second))
	unprobed := pod(corev1.PodPending, false, 0)
	unprobed.Spec.Containers[0].StartupProbe = nil
	unprobed.CreationTimestamp = metav1.NewTime(now.Add(-200 * time.Second))
	unprobedStuck := unprobed.DeepCopy()
	unprobedStuck.CreationTimestamp = metav1.NewTime(now.Add(-301 * time.Second))
	deleting := pod(corev1.PodPending, false, 0)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	initFailing := pod(corev1.PodPending, false, 0)
	initFailing.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: specs.RestoreContainerName, RestartCount: 2}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"no Pod", nil, false},
		{"Pending: volumes, images or a node to come", pod(corev1.PodPending, false, 0), true},
		{"Pending, no container status yet", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now)}, Status: corev1.PodStatus{Phase: corev1.PodPending}}, true},
		{"Pending past its startup probe's 300 s: a volume that never attaches", stuck, false},
		{"no startup probe (another operator's Pod): 300 s too", unprobed, true},
		{"no startup probe, past 300 s", unprobedStuck, false},
		{"running, startup probe not passed yet", pod(corev1.PodRunning, false, 0), true},
		{"running, started", pod(corev1.PodRunning, true, 0), false},
		{"restarted: it started and died", pod(corev1.PodRunning, false, 3), false},
		{"an init container restarting", initFailing, false},
		{"being deleted", deleting, false},
		{"unschedulable", pod(corev1.PodPending, false, 0, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}), false},
		{"failed", pod(corev1.PodFailed, false, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := memberStarting(tc.pod, now); got != tc.want {
				t.Fatalf("memberStarting %v, want %v", got, tc.want)
			}
		})
	}
}

func TestQuorumMissing(t *testing.T) {
	formed := func(edit func(*etcdv1.EtcdCluster)) *etcdv1.EtcdCluster {
		c := &etcdv1.EtcdCluster{Status: etcdv1.EtcdClusterStatus{ClusterID: "1a"}}
		if edit != nil {
			edit(c)
		}
		return c
	}
	for _, tc := range []struct {
		name string
		c    *etcdv1.EtcdCluster
		v    clusterView
		want bool
	}{
		{"formed, silent", formed(nil), clusterView{}, true},
		{"formed, answering", formed(nil), clusterView{reachable: true}, false},
		{"paused", formed(func(c *etcdv1.EtcdCluster) { c.Spec.Replicas = ptrTo[int32](0) }), clusterView{}, false},
		{"never formed", formed(func(c *etcdv1.EtcdCluster) { c.Status.ClusterID = "" }), clusterView{}, false},
		{"no client (auth refused)", formed(nil), clusterView{clientErr: etcd.ErrAuthFailed}, false},
		{"being deleted", formed(func(c *etcdv1.EtcdCluster) { c.DeletionTimestamp = &metav1.Time{Time: time.Now()} }), clusterView{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quorumMissing(tc.c, &tc.v); got != tc.want {
				t.Fatalf("quorumMissing %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMemberJoining(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	made, began := now.Add(-time.Minute), now.Add(-50*time.Second)
	pod := func(started, ready bool, readySince time.Time, restarts int32) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(made)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: specs.ContainerName, StartupProbe: &corev1.Probe{PeriodSeconds: 2, FailureThreshold: 150}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: specs.ContainerName, Started: &started, Ready: ready, RestartCount: restarts,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(began)}}}}}}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(readySince)}}
		return p
	}
	old := pod(true, false, made, 0)
	old.CreationTimestamp = metav1.NewTime(now.Add(-301 * time.Second))
	pending := pod(false, false, made, 0)
	pending.Status.Phase = corev1.PodPending
	noCondition := pod(true, false, made, 0)
	noCondition.Status.Conditions = nil
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"no Pod", nil, false},
		{"up, not Ready since it was made", pod(true, false, made, 0), true},
		{"up, no Ready condition yet", noCondition, true},
		{"startup probe not passed: starting, not joining", pod(false, false, made, 0), false},
		{"Pending", pending, false},
		{"Ready: it serves", pod(true, true, began.Add(time.Second), 0), false},
		{"Ready once, not any more: it lost its quorum", pod(true, false, began.Add(10*time.Second), 0), false},
		{"restarted", pod(true, false, made, 1), false},
		{"past its startup budget", old, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := memberJoining(tc.pod, now); got != tc.want {
				t.Fatalf("memberJoining %v, want %v", got, tc.want)
			}
		})
	}
}

// A member that answers and names a leader serves with a quorum; one that answers without a
// leader does not, whatever its Pod shows.
func TestLossVotersServingByLeader(t *testing.T) {
	v := &clusterView{pods: map[string]*corev1.Pod{}, survivors: []survivor{
		{name: "db-0", answered: true, status: etcd.Status{Leader: 7}},
		{name: "db-1", answered: true},
		{name: "db-2"},
		{name: "db-3", answered: true, status: etcd.Status{Leader: 7, IsLearner: true}},
	}}
	got := fmt.Sprint(lossVoters(v, time.Now()))
	if want := "[db-0: answers,serving db-1: answers db-2: silent]"; got != want {
		t.Fatalf("voters %s, want %s", got, want)
	}
}

// setPod gives the member a Pod in that phase whose etcd container has or has not passed its
// startup probe, as the kubelet reports it, and not Ready: without a quorum, etcd's /readyz
// fails.
func (h *harness) setPod(name string, phase corev1.PodPhase, started bool) {
	h.t.Helper()
	pod := &corev1.Pod{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, pod); apierrors.IsNotFound(err) {
		pod = h.startPodOf(name)
	} else if err != nil {
		h.t.Fatal(err)
	}
	pod.CreationTimestamp = metav1.NewTime(h.r.now()) // made now, on the reconciler's clock
	if err := h.api.Update(context.Background(), pod); err != nil {
		h.t.Fatal(err)
	}
	pod.Status.Phase = phase
	cs := corev1.ContainerStatus{Name: specs.ContainerName, Started: &started}
	if phase == corev1.PodRunning {
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: pod.CreationTimestamp}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: pod.CreationTimestamp}}
	if err := h.api.Status().Update(context.Background(), pod); err != nil {
		h.t.Fatal(err)
	}
}

// A cluster that was Paused, or Unreachable, for longer than the grace period and then lost
// its quorum is not recovered at once: the grace period counts from the loss, and not while
// members are still starting after a resume.
func TestAutomaticRecoveryCountsFromTheLossNotAnEarlierFalse(t *testing.T) {
	for _, earlier := range []string{"Paused", "Unreachable"} {
		t.Run(earlier, func(t *testing.T) {
			h := runningHarness(t)
			h.editSpec(func(s *etcdv1.EtcdClusterSpec) {
				s.QuorumLoss = &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember, GracePeriodSeconds: ptrTo[int32](60)}
			})
			h.setPod("db-1", corev1.PodRunning, true)
			newClient := h.r.NewClient
			if earlier == "Paused" {
				h.setReplicas(0)
			} else {
				h.r.NewClient = func(context.Context, *etcdv1.EtcdCluster, []string) (etcd.Client, error) {
					return nil, etcd.ErrAuthFailed
				}
			}
			h.reconcile()
			if av := h.condition(etcdv1.ConditionAvailable); av.Reason != earlier {
				t.Fatalf("Available %+v, want %s", av, earlier)
			}
			// An hour later: the members come back, db-2 and db-3 still attaching their volumes.
			h.r.Now = func() time.Time { return time.Now().Add(time.Hour) }
			h.r.NewClient = newClient
			if earlier == "Paused" {
				h.setReplicas(3)
			}
			h.setPod("db-2", corev1.PodPending, false)
			h.setPod("db-3", corev1.PodPending, false)
			h.etcd.SetDown(h.etcdID("db-2"), true)
			h.etcd.SetDown(h.etcdID("db-3"), true)
			h.reconcile()
			h.reconcile()
			if from := h.clusterObj().Annotations[etcdv1.AnnotationRecoverFrom]; from != "" {
				t.Fatalf("recovery asked for at once after %s: %s", earlier, from)
			}
			if av := h.condition(etcdv1.ConditionAvailable); av.Reason != etcdv1.ReasonQuorumLost {
				t.Fatalf("Available %+v", av)
			}
			if since := h.clusterObj().Status.QuorumLostSince; since != nil {
				t.Fatalf("the loss counted while members start: since %s", since)
			}
			// They start and do not answer: the count begins now, and the recovery waits for it.
			h.setPod("db-2", corev1.PodRunning, true)
			h.setPod("db-3", corev1.PodRunning, true)
			h.reconcile()
			h.reconcile()
			if from := h.clusterObj().Annotations[etcdv1.AnnotationRecoverFrom]; from != "" {
				t.Fatalf("recovery asked for within the grace period: %s", from)
			}
			if since := h.clusterObj().Status.QuorumLostSince; since == nil {
				t.Fatal("the loss is not counted once every member is up")
			}
			h.r.Now = func() time.Time { return time.Now().Add(time.Hour + 61*time.Second) }
			h.reconcile()
			if from := h.clusterObj().Annotations[etcdv1.AnnotationRecoverFrom]; from != "db-1" {
				t.Fatalf("recover-from %q after the grace period, want db-1", from)
			}
		})
	}
}

// The automatic request is written onto the version of the cluster that was decided on: a
// policy set to Manual since the look read the cluster is a conflict, and no recovery is asked.
func TestAutomaticRecoveryRequestNotWrittenOverANewerSpec(t *testing.T) {
	h := runningHarness(t)
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) {
		s.QuorumLoss = &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember, GracePeriodSeconds: ptrTo[int32](60)}
	})
	decidedOn := h.clusterObj()
	h.editSpec(func(s *etcdv1.EtcdClusterSpec) { s.QuorumLoss.Policy = etcdv1.QuorumLossManual })
	err := h.r.requestRecovery(context.Background(), decidedOn, "db-1")
	if !apierrors.IsConflict(err) {
		t.Fatalf("requestRecovery over a newer spec = %v, want a conflict", err)
	}
	if from := h.clusterObj().Annotations[etcdv1.AnnotationRecoverFrom]; from != "" {
		t.Fatalf("recovery from %s asked over a spec that no longer asks for it", from)
	}
}
