package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// waitDegradedFor waits until the cluster is Degraded with a message naming reason, and a
// Warning event with that reason was recorded in the namespace.
func waitDegradedFor(t *testing.T, ns, name, reason string) {
	t.Helper()
	eventually(t, 2*time.Minute, name+" Degraded with "+reason, func() error {
		cond := meta.FindStatusCondition(getCluster(t, ns, name).Status.Conditions, etcdv1.ConditionDegraded)
		if cond == nil || cond.Status != "True" || !strings.Contains(cond.Message, reason) {
			return fmt.Errorf("Degraded is %+v", cond)
		}
		events := &eventsv1.EventList{}
		if err := k8s.List(context.Background(), events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == reason && e.Type == "Warning" {
				return nil
			}
		}
		return fmt.Errorf("no Warning event with reason %s among %d events", reason, len(events.Items))
	})
}

// Members that cannot start say why in the cluster's status and in events, and such a
// cluster, whose etcd never answered, is still deleted completely.
func TestMembersThatCannotStartSayWhyAndTheClusterStillDeletes(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	one := int32(1)
	missingClass := "no-such-class"
	noClass := &etcdv1.EtcdCluster{Spec: etcdv1.EtcdClusterSpec{Replicas: &one, Version: etcdVersion,
		Storage: etcdv1.StorageSpec{StorageClassName: &missingClass}}}
	noClass.Name, noClass.Namespace = "noclass", ns
	noImage := &etcdv1.EtcdCluster{Spec: etcdv1.EtcdClusterSpec{Replicas: &one, Version: "3.6.1"}}
	noImage.Name, noImage.Namespace = "noimage", ns
	for _, c := range []*etcdv1.EtcdCluster{noClass, noImage} {
		if err := k8s.Create(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	waitDegradedFor(t, ns, "noclass", "StorageClassNotFound")
	waitDegradedFor(t, ns, "noimage", "ImagePullFailed")
	deleteAndWaitGone(t, ns, "noclass")
	deleteAndWaitGone(t, ns, "noimage")
}

// A paused cluster (no member running, etcd unreachable) is deleted completely too.
func TestDeletingAPausedClusterRemovesEverything(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "asleep", 3)
	waitSettled(t, ns, "asleep", 3, 4*time.Minute)
	setReplicas(t, ns, "asleep", 0)
	waitPaused(t, ns, "asleep", 3)
	deleteAndWaitGone(t, ns, "asleep")
}
