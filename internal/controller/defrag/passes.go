package defrag

import (
	"context"
	"maps"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Clock is the clock of the schedules; time.Now when nil.
type Clock func() time.Time

func (c Clock) now() time.Time {
	if c != nil {
		return c()
	}
	return time.Now()
}

// passMaker is what the two schedules of passes share, spec.defrag of an EtcdCluster and an
// EtcdDefragPolicy: the passes of a schedule carry its label and the annotation of the time
// they were due, and are named by that time, so a second attempt at the same time is a no-op.
type passMaker struct {
	// owner is the cluster or the policy: it controls its passes, which go with it.
	owner client.Object
	// label marks the owner's passes; its value is the owner's name.
	label string
	// labels are more labels of every pass.
	labels map[string]string
	// prefix begins every pass's name; the due time in Unix seconds ends it.
	prefix string
	// schedule is the cron expression, for the event.
	schedule string
	// spec is the spec of every pass.
	spec etcdv1.EtcdDefragSpec
	// cluster is the cluster the passes defragment, when known: its spec.additionalMetadata
	// reaches them, as it does every object the operator makes for it.
	cluster *etcdv1.EtcdCluster
}

// name is the name of the pass due at due: the same for a second attempt at that time.
func (m passMaker) name(due time.Time) string {
	return m.prefix + strconv.FormatInt(due.Unix(), 10)
}

// list returns the owner's passes.
func (m passMaker) list(ctx context.Context, r client.Reader) ([]etcdv1.EtcdDefrag, error) {
	list := &etcdv1.EtcdDefragList{}
	if err := r.List(ctx, list, client.InNamespace(m.owner.GetNamespace()), client.MatchingLabels{m.label: m.owner.GetName()}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// create makes the pass due at due, owned by the owner, and says so in an event; one that
// exists already (an earlier attempt at the same time made it) is left as it is.
func (m passMaker) create(ctx context.Context, c client.Client, rec events.EventRecorder, due time.Time) error {
	labels := map[string]string{m.label: m.owner.GetName()}
	maps.Copy(labels, m.labels)
	meta := metav1.ObjectMeta{
		Name: m.name(due), Namespace: m.owner.GetNamespace(),
		Labels:      labels,
		Annotations: map[string]string{etcdv1.AnnotationScheduledTime: due.UTC().Format(time.RFC3339)},
	}
	if m.cluster != nil {
		meta = specs.WithAdditionalMetadata(m.cluster, meta)
	}
	d := &etcdv1.EtcdDefrag{ObjectMeta: meta, Spec: *m.spec.DeepCopy()}
	if err := controllerutil.SetControllerReference(m.owner, d, c.Scheme()); err != nil {
		return err
	}
	err := c.Create(ctx, d)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return err
	}
	kit.Emit(ctx, rec, m.owner, d, corev1.EventTypeNormal, etcdv1.ReasonDefragScheduled, "Defragment", "created EtcdDefrag %s for the schedule %q", d.Name, m.schedule)
	return nil
}

// lastScheduled is the due time of the newest of passes, or since when none is newer.
func lastScheduled(since time.Time, passes []etcdv1.EtcdDefrag) time.Time {
	last := since
	for _, p := range passes {
		if t, err := time.Parse(time.RFC3339, p.Annotations[etcdv1.AnnotationScheduledTime]); err == nil && t.After(last) {
			last = t
		}
	}
	return last
}

// beyondHistory are the finished passes beyond the newest keep, by due time: those to delete.
func beyondHistory(passes []etcdv1.EtcdDefrag, keep int) []etcdv1.EtcdDefrag {
	var done []etcdv1.EtcdDefrag
	for _, p := range passes {
		if finished(&p) {
			done = append(done, p)
		}
	}
	sort.SliceStable(done, func(i, j int) bool {
		return done[i].Annotations[etcdv1.AnnotationScheduledTime] > done[j].Annotations[etcdv1.AnnotationScheduledTime]
	})
	if keep >= len(done) {
		return nil
	}
	return done[max(keep, 0):]
}

// prune deletes the finished passes beyond the newest keep, and names those it deleted.
func prune(ctx context.Context, c client.Client, passes []etcdv1.EtcdDefrag, keep int) ([]string, error) {
	var pruned []string
	for _, p := range beyondHistory(passes, keep) {
		if err := c.Delete(ctx, &p); client.IgnoreNotFound(err) != nil {
			return pruned, err
		}
		pruned = append(pruned, p.Name)
	}
	return pruned, nil
}
