package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A changed Pod spec (here the memory request and a label from additionalMetadata) reaches
// every member, one restart at a time and the leader last, with the same member IDs and no
// lost write.
func TestChangedPodSpecRollsThroughTheMembers(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createCluster(t, ns, "roll", 3)
	before := waitSettled(t, ns, "roll", 3, 4*time.Minute)
	roll := watchRoll(t, ns, "roll", before)
	w := startWriter(t, ns, "roll", "roll")
	changed := time.Now()

	c := getCluster(t, ns, "roll")
	patch := client.MergeFrom(c.DeepCopy())
	want := resource.MustParse("300Mi")
	c.Spec.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: want}}
	if err := k8s.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 6*time.Minute, "every member's Pod with the new memory request", func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
			return err
		}
		updated := 0
		for _, p := range pods.Items {
			if got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]; got.Cmp(want) == 0 && p.DeletionTimestamp.IsZero() {
				updated++
			}
		}
		if updated != 3 {
			return fmt.Errorf("%d of 3 Pods updated", updated)
		}
		return nil
	})
	after := waitSettledAfter(t, ns, "roll", 3, changed, 4*time.Minute)
	if b, a := fmt.Sprint(sorted(memberIDs(before))), fmt.Sprint(sorted(memberIDs(after))); a != b {
		t.Fatalf("member IDs changed across the rolling restart:\n before %s\n after  %s", b, a)
	}
	w.stopAndVerifyAtMost(t, 20, roll.check(t, "rolling restart"))
}
