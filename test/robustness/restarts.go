package robustness

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Restarts follows the restarts of a cluster's member Pods from their changes in order (a
// watch's events): how many members were restarting at once at most, a member restarting
// from its Pod's deletion until the Pod that replaces it is Ready, and how often each
// member's Pod was replaced. A running Pod whose readiness flickers under load is not
// restarting: the operator did not restart it.
type Restarts struct {
	members    []string
	uid        map[string]types.UID
	restarting map[string]bool
	// MostAtOnce is the most members restarting at the same time.
	MostAtOnce int
	// Replaced counts the new Pods of each member.
	Replaced map[string]int
	// Order is the restarts that ended, in the order they ended, each when it ended.
	Order []Turn
}

// NewRestarts starts from the members' Pods as listed, all of which must be up.
func NewRestarts(members []string, pods []corev1.Pod) (*Restarts, error) {
	r := &Restarts{members: members, uid: map[string]types.UID{}, restarting: map[string]bool{}, Replaced: map[string]int{}}
	for i := range pods {
		p := &pods[i]
		if !p.DeletionTimestamp.IsZero() || !PodReady(p) {
			return nil, fmt.Errorf("member Pod %s is not up", p.Name)
		}
		r.uid[p.Name] = p.UID
	}
	for _, m := range members {
		if r.uid[m] == "" {
			return nil, fmt.Errorf("member %s has no Pod", m)
		}
	}
	return r, nil
}

// Observe applies one change of a Pod (deleted: the object is gone), seen at the time at.
func (r *Restarts) Observe(pod *corev1.Pod, deleted bool, at time.Time) {
	name := pod.Name
	was := r.restarting[name]
	switch {
	case deleted || !pod.DeletionTimestamp.IsZero():
		r.restarting[name] = true
	case pod.UID != r.uid[name]: // the Pod that replaces the deleted one
		r.uid[name] = pod.UID
		r.Replaced[name]++
		r.restarting[name] = !PodReady(pod)
	case PodReady(pod):
		r.restarting[name] = false
	}
	if was && !r.restarting[name] {
		r.Order = append(r.Order, Turn{Member: name, Done: at})
	}
	now := 0
	for _, m := range r.members {
		if r.restarting[m] {
			now++
		}
	}
	r.MostAtOnce = max(r.MostAtOnce, now)
}

// PodReady reports the Pod's Ready condition.
func PodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
