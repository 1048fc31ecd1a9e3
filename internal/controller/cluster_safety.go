package controller

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/retention"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// This file holds what keeps a member's identity and its data together: what the operator
// observes beyond etcd's member list (PVCs, Pods, alarms, what each member still says when
// there is no quorum), the quorum projection made right before every removal, and the pure
// decision of which damaged member to replace.

// observeObjects lists the cluster's PVCs and Pods from the cache.
func (r *ClusterReconciler) observeObjects(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) error {
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

// survivor is what one member says about itself without a quorum.
type survivor struct {
	name     string
	answered bool
	status   etcd.Status
}

// askSurvivors asks every member that may run for its status, which each answers from its
// own state (no quorum needed): its revision, raft term and index, and whom it takes for
// the leader.
func askSurvivors(ctx context.Context, cli etcd.Client, c *etcdv1.EtcdCluster, v *clusterView) []survivor {
	names := knownMemberNames(c, v)
	out := make([]survivor, len(names))
	done := make(chan struct{}, len(names))
	for i, name := range names {
		go func() {
			defer func() { done <- struct{}{} }()
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			st, err := cli.Status(sctx, specs.ClientURL(c, name))
			out[i] = survivor{name: name, answered: err == nil, status: st}
		}()
	}
	for range names {
		<-done
	}
	return out
}

// quorumLostMessage says what each member still has, so that a person can see which one is
// the most advanced before deciding anything.
func quorumLostMessage(survivors []survivor) string {
	if len(survivors) == 0 {
		return "no member answers, and no member, PVC or Pod is known to ask"
	}
	parts := make([]string, 0, len(survivors))
	answered := 0
	for _, s := range survivors {
		if !s.answered {
			parts = append(parts, s.name+": not answering")
			continue
		}
		answered++
		role := "follower"
		switch {
		case s.status.IsLearner:
			role = "learner"
		case s.status.Leader == 0:
			role = "no leader"
		case s.status.Leader == s.status.MemberID:
			role = "leader"
		}
		parts = append(parts, fmt.Sprintf("%s (%s): revision %d, raft term %d, raft index %d, %s",
			s.name, etcd.FormatID(s.status.MemberID), s.status.Revision, s.status.RaftTerm, s.status.RaftIndex, role))
	}
	return fmt.Sprintf("the member list cannot be read (no quorum); %d of %d members answer: %s",
		answered, len(survivors), strings.Join(parts, "; "))
}

// listAlarms asks etcd for its alarms; false when it cannot say.
func listAlarms(ctx context.Context, cli etcd.Client) ([]etcd.Alarm, bool) {
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	alarms, err := cli.Alarms(actx)
	return alarms, err == nil
}

// corruptMembers are the members with a CORRUPT alarm.
func corruptMembers(alarms []etcd.Alarm) map[uint64]bool {
	out := map[uint64]bool{}
	for _, a := range alarms {
		if a.Type == etcd.AlarmCorrupt {
			out[a.MemberID] = true
		}
	}
	return out
}

// memberFacts is what the operator observed about one EtcdMember, as planReplacement needs it.
type memberFacts struct {
	name       string
	id         uint64
	inEtcd     bool // etcd's member list has it
	started    bool // it published its name: it has (had) data that etcd counts on
	healthy    bool
	memory     bool // tmpfs: its data lives as long as its Pod
	pvcPresent bool // its PVC exists and is not being deleted
	podPresent bool
	dataError  string // why its etcd exits on its data, from the Pod's last termination
	corrupt    bool
	asked      bool // the replace annotation
	recorded   bool // its status records a member ID: it was in etcd once
	deleting   bool
}

// damage says why a member's data is lost or unusable, "" when it is not.
func damage(f memberFacts) string {
	switch {
	case f.deleting:
		return ""
	case f.asked:
		return "its replacement was asked for (" + etcdv1.AnnotationReplace + ")"
	case !f.inEtcd && f.recorded:
		return "etcd no longer lists its member ID: it was removed outside the operator"
	case !f.inEtcd || !f.started:
		return "" // nothing etcd counts on yet: a fresh start is a first start
	case f.corrupt:
		return "etcd raised a CORRUPT alarm for it"
	case f.memory && !f.podPresent:
		return "its tmpfs data went with its Pod"
	case !f.memory && !f.pvcPresent:
		return "its PVC is gone"
	case f.dataError != "" && !f.healthy:
		// Only while it is down: a member that exited once and serves again has its data.
		return "it cannot start on its data: " + f.dataError
	}
	return ""
}

// replacementPlan is planReplacement's decision: which member to replace and why, or why
// not now.
type replacementPlan struct {
	member  string
	why     string
	refusal string // non-empty: the replacement must wait, for this reason
}

// planReplacement picks the damaged member to replace next: unhealthy ones first (removing
// them costs the quorum nothing), and only when the quorum projected without it holds.
// nil when no member is damaged.
func planReplacement(facts []memberFacts, members []etcd.Member, healthy map[uint64]bool) *replacementPlan {
	var damaged []memberFacts
	for _, f := range facts {
		if damage(f) != "" {
			damaged = append(damaged, f)
		}
	}
	if len(damaged) == 0 {
		return nil
	}
	sort.SliceStable(damaged, func(i, j int) bool { return !damaged[i].healthy && damaged[j].healthy })
	var refused *replacementPlan
	for _, f := range damaged {
		plan := &replacementPlan{member: f.name, why: damage(f)}
		if !f.inEtcd {
			return plan
		}
		if ok, why := kit.RemovalVerdict(members, healthy, f.id); !ok {
			plan.refusal = why
			if refused == nil {
				refused = plan
			}
			continue
		}
		return plan
	}
	return refused
}

// facts gathers memberFacts for every EtcdMember of the view.
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
