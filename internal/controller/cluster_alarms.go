package controller

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// Reasons of the Alarm condition.
const (
	ReasonNoAlarm = "NoAlarm"
	ReasonNoSpace = "NoSpace"
	ReasonCorrupt = "Corrupt"
)

// alarmCondition turns etcd's alarms into the Alarm condition: CORRUPT before NOSPACE,
// each naming its members.
func alarmCondition(v *clusterView, alarms []etcd.Alarm) metav1.Condition {
	byType := map[string][]string{}
	for _, a := range alarms {
		name := etcd.FormatID(a.MemberID)
		if em, ok := v.etcdMemberByID(a.MemberID); ok && em.Name != "" {
			name = em.Name
		}
		byType[a.Type] = append(byType[a.Type], name)
	}
	cond := metav1.Condition{Type: etcdv1.ConditionAlarm, Status: metav1.ConditionFalse, Reason: ReasonNoAlarm, Message: "etcd has no alarm raised"}
	var parts []string
	for _, t := range []string{etcd.AlarmCorrupt, etcd.AlarmNoSpace} {
		names := byType[t]
		if len(names) == 0 {
			continue
		}
		sort.Strings(names)
		if cond.Status == metav1.ConditionFalse {
			cond.Status, cond.Reason = metav1.ConditionTrue, ReasonNoSpace
			if t == etcd.AlarmCorrupt {
				cond.Reason = ReasonCorrupt
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
func (r *ClusterReconciler) setAlarmCondition(c *etcdv1.EtcdCluster, v *clusterView) {
	if !v.alarmsKnown {
		return
	}
	cond := alarmCondition(v, v.alarms)
	cond.ObservedGeneration = c.Generation
	prev := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAlarm)
	switch {
	case cond.Status == metav1.ConditionTrue && (prev == nil || prev.Message != cond.Message):
		r.event(c, corev1.EventTypeWarning, "AlarmRaised", "Alarm", "%s", cond.Message)
	case cond.Status == metav1.ConditionFalse && prev != nil && prev.Status == metav1.ConditionTrue:
		r.event(c, corev1.EventTypeNormal, "AlarmCleared", "Alarm", "etcd has no alarm raised any more")
	}
	meta.SetStatusCondition(&c.Status.Conditions, cond)
}

// Emit records an event about regarding (and related, when not nil) and logs it, so that the
// operator's other controllers (defragmentation, NOSPACE remediation) speak as this one does.
func Emit(rec events.EventRecorder, regarding, related client.Object, eventType, reason, action, format string, args ...any) {
	emit(rec, regarding, related, eventType, reason, action, format, args...)
}
