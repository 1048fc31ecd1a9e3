package cluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Every object the cluster controller makes for a cluster (its EtcdMembers, Services,
// PodDisruptionBudget and NetworkPolicy) carries spec.additionalMetadata.
func TestEveryObjectOfTheClusterCarriesAdditionalMetadata(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.cluster.Spec.AdditionalMetadata = &etcdv1.AdditionalMetadata{
		Labels:      map[string]string{"team": "storage"},
		Annotations: map[string]string{"owner": "team-a", etcdv1.AnnotationReplace: "true"},
	}
	h.cluster.Spec.NetworkPolicy = &etcdv1.NetworkPolicySpec{Enabled: true}
	if err := h.api.Update(context.Background(), h.cluster); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	h.running()
	h.reconcile()
	seen := map[string]int{}
	for kind, list := range map[string]client.ObjectList{
		"EtcdMember": &etcdv1.EtcdMemberList{}, "Service": &corev1.ServiceList{},
		"PodDisruptionBudget": &policyv1.PodDisruptionBudgetList{}, "NetworkPolicy": &networkingv1.NetworkPolicyList{},
	} {
		if err := h.api.List(context.Background(), list, client.InNamespace("ns")); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			obj := item.(client.Object)
			seen[kind]++
			if obj.GetLabels()["team"] != "storage" || obj.GetAnnotations()["owner"] != "team-a" {
				t.Errorf("%s %s: labels %v, annotations %v", kind, obj.GetName(), obj.GetLabels(), obj.GetAnnotations())
			}
			if _, ok := obj.GetAnnotations()[etcdv1.AnnotationReplace]; ok {
				t.Errorf("%s %s took the operator's annotation %s from spec.additionalMetadata", kind, obj.GetName(), etcdv1.AnnotationReplace)
			}
		}
	}
	if seen["EtcdMember"] != 3 || seen["Service"] != 2 || seen["PodDisruptionBudget"] != 1 || seen["NetworkPolicy"] != 1 {
		t.Fatalf("the cluster made %v", seen)
	}
}
