package cluster

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// alarmCondition turns etcd's alarms into the Alarm condition: CORRUPT before NOSPACE,
// each naming its members.
func alarmCondition(v *clusterView, alarms []etcd.Alarm) metav1.Condition {
	byType := map[string][]string{}
	for _, a := range alarms {
		name := etcd.FormatID(a.MemberID)
		if em, ok := v.etcdMemberByID(a.MemberID); ok && em.Name != "" {
			name = em.Name
		} else if a.MemberID == 0 {
			// etcd's corruption check raises CORRUPT on ID 0 when it cannot tell which
			// member differs (no quorum agreed on a hash).
			name = "the whole cluster (etcd could not tell which member)"
		}
		byType[a.Type] = append(byType[a.Type], name)
	}
	cond := metav1.Condition{Type: etcdv1.ConditionAlarm, Status: metav1.ConditionFalse, Reason: etcdv1.ReasonNoAlarm, Message: "etcd has no alarm raised"}
	var parts []string
	for _, t := range []string{etcd.AlarmCorrupt, etcd.AlarmNoSpace} {
		names := byType[t]
		if len(names) == 0 {
			continue
		}
		sort.Strings(names)
		if cond.Status == metav1.ConditionFalse {
			cond.Status, cond.Reason = metav1.ConditionTrue, etcdv1.ReasonNoSpace
			if t == etcd.AlarmCorrupt {
				cond.Reason = etcdv1.ReasonCorrupt
			}
		}
		parts = append(parts, fmt.Sprintf("%s raised by %s", t, strings.Join(names, ", ")))
	}
	if len(parts) > 0 {
		cond.Message = strings.Join(parts, "; ") + alarmAdvice(byType)
	}
	return cond
}

func alarmAdvice(byType map[string][]string) string {
	if len(byType[etcd.AlarmCorrupt]) > 0 {
		return ": a corrupt member's data differs from the others'; the operator never disarms CORRUPT (the member must be replaced)"
	}
	return ": etcd refuses writes until the backend is compacted, defragmented and the alarm disarmed (automatic unless spec.alarms.noSpace is Report)"
}

// setAlarmCondition records etcd's alarms, as observe listed them, in the Alarm condition
// and tells, with an event, when one is raised or cleared. When they could not be read (no
// quorum, a failed call) the condition stays as it was.
func (r *Reconciler) setAlarmCondition(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) {
	if !v.alarmsKnown {
		return
	}
	cond := alarmCondition(v, v.alarms)
	cond.ObservedGeneration = c.Generation
	prev := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAlarm)
	switch {
	case cond.Status == metav1.ConditionTrue && (prev == nil || prev.Message != cond.Message):
		r.event(ctx, c, corev1.EventTypeWarning, etcdv1.ReasonAlarmRaised, "Alarm", "%s", cond.Message)
	case cond.Status == metav1.ConditionFalse && prev != nil && prev.Status == metav1.ConditionTrue:
		r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonAlarmCleared, "Alarm", "etcd has no alarm raised any more")
	}
	meta.SetStatusCondition(&c.Status.Conditions, cond)
}

// staleAlarms are the alarms etcd keeps for members it no longer lists. etcd does not drop a
// member's alarms when the member is removed, and its CORRUPT alarm keeps refusing every
// write of the whole cluster: once the corrupt member has been replaced, its alarm describes
// nothing that exists. ID 0 is never a member: it is etcd's "some member, it could not tell
// which", and stays.
func staleAlarms(alarms []etcd.Alarm, members []etcd.Member) []etcd.Alarm {
	var out []etcd.Alarm
	for _, a := range alarms {
		if a.MemberID != 0 && !slices.ContainsFunc(members, func(m etcd.Member) bool { return m.ID == a.MemberID }) {
			out = append(out, a)
		}
	}
	return out
}

// disarmStaleAlarms disarms the alarms of members etcd no longer lists (staleAlarms): a
// replaced corrupt member's CORRUPT, above all. A member's own alarm is never disarmed here
// while the member is in the cluster. The member list is read again right before: an alarm
// raised by a member added after this reconcile's look must not pass for a removed one's.
func (r *Reconciler) disarmStaleAlarms(ctx context.Context, c *etcdv1.EtcdCluster, v *clusterView) (bool, error) {
	stale := staleAlarms(v.alarms, v.etcdMembers)
	if len(stale) == 0 {
		return false, nil
	}
	_, members, err := v.etcd.MemberList(ctx)
	if err != nil {
		return false, err
	}
	stale = staleAlarms(stale, members)
	for _, a := range stale {
		if err := v.etcd.DisarmAlarm(ctx, a); err != nil {
			return false, err
		}
		r.event(ctx, c, corev1.EventTypeNormal, etcdv1.ReasonRemovedMemberAlarmDisarmed, "Alarm",
			"disarmed %s of member %s: etcd no longer lists that member (it was removed or replaced)", a.Type, etcd.FormatID(a.MemberID))
		v.alarms = slices.DeleteFunc(v.alarms, func(x etcd.Alarm) bool { return x == a })
	}
	v.corrupt = corruptMembers(v.alarms)
	return len(stale) > 0, nil
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
