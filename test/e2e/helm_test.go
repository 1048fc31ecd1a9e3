package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

const (
	helmRelease   = "eo-helm" // not "etcd-operator": config/default's cluster-wide names stay apart
	helmNamespace = "etcd-operator-helm"
	kustomizeNS   = "etcd-operator-system"
)

func helm(t *testing.T, args ...string) {
	t.Helper()
	bin := os.Getenv("E2E_HELM")
	if bin == "" {
		t.Fatal("E2E_HELM is not set: run through hack/e2e.sh, which builds helm")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// scaleKustomizeOperator sets the replicas of the operator that hack/e2e.sh deployed from
// config/default: two operators must not manage the same clusters.
func scaleKustomizeOperator(t *testing.T, replicas int) {
	t.Helper()
	kubectl(t, kustomizeNS, "scale", "deployment/etcd-operator", fmt.Sprintf("--replicas=%d", replicas))
	eventually(t, 2*time.Minute, fmt.Sprintf("config/default's operator at %d Pods", replicas), func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(kustomizeNS), client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator"}); err != nil {
			return err
		}
		if len(pods.Items) != replicas {
			return fmt.Errorf("%d Pods", len(pods.Items))
		}
		return nil
	})
	if replicas > 0 {
		kubectl(t, kustomizeNS, "rollout", "status", "deployment/etcd-operator", "--timeout=3m")
	}
}

// The chart installed with helm (instead of config/default) runs an operator that manages
// three clusters (3, 1 and 3 members); helm upgrade with a changed value rolls the operator
// and restarts no etcd member of any of them.
func TestHelmInstallAndUpgrade(t *testing.T) {
	scaleKustomizeOperator(t, 0)
	t.Cleanup(func() { scaleKustomizeOperator(t, 1) })
	helm(t, "install", helmRelease, "../../charts/etcd-operator", "--namespace", helmNamespace, "--create-namespace",
		"--set", "image.repository=etcd-operator", "--set", "image.tag=dev", "--wait", "--timeout", "3m")
	t.Cleanup(func() {
		helm(t, "uninstall", helmRelease, "--namespace", helmNamespace, "--wait")
		kubectl(t, kustomizeNS, "delete", "namespace", helmNamespace, "--wait=false")
	})

	ns := namespace(t)
	sizes := map[string]int32{"helm": 3, "helm-one": 1, "helm-three": 3}
	membersBefore := map[string]string{}
	for name, n := range sizes {
		createCluster(t, ns, name, n)
	}
	for name, n := range sizes {
		waitSettled(t, ns, name, n, 5*time.Minute)
		maps.Copy(membersBefore, memberPods(t, ns, name))
	}
	operatorBefore := deploymentGeneration(t)

	helm(t, "upgrade", helmRelease, "../../charts/etcd-operator", "--namespace", helmNamespace, "--reuse-values",
		"--set", "logLevel=debug", "--wait", "--timeout", "3m")
	kubectl(t, helmNamespace, "rollout", "status", "deployment/"+helmRelease, "--timeout=3m")
	if after := deploymentGeneration(t); after == operatorBefore {
		t.Fatal("helm upgrade with a changed logLevel did not roll the operator's Deployment")
	}
	deploy := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: helmNamespace, Name: helmRelease}, deploy); err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(deploy.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--zap-log-level=debug") {
		t.Fatalf("the upgraded operator's args: %s", args)
	}
	// The new operator looks at the cluster (scale it to prove it manages it), and no
	// member's Pod was replaced or restarted on the way.
	setReplicas(t, ns, "helm", 4)
	waitSettled(t, ns, "helm", 4, 5*time.Minute)
	after := map[string]string{}
	for name := range sizes {
		maps.Copy(after, memberPods(t, ns, name))
	}
	if len(membersBefore) != 7 {
		t.Fatalf("member Pods before the upgrade: %v, want 7", membersBefore)
	}
	for name, before := range membersBefore {
		if after[name] != before {
			t.Errorf("member Pod %s changed across the operator's upgrade: %s -> %s", name, before, after[name])
		}
	}
}

// memberPods maps each member Pod's name to its UID and container restarts.
func memberPods(t *testing.T, ns, cluster string) map[string]string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: cluster}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		restarts := int32(0)
		for _, s := range p.Status.ContainerStatuses {
			restarts += s.RestartCount
		}
		out[p.Name] = fmt.Sprintf("uid %s restarts %d", p.UID, restarts)
	}
	return out
}

func deploymentGeneration(t *testing.T) int64 {
	t.Helper()
	deploy := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: helmNamespace, Name: helmRelease}, deploy); err != nil {
		t.Fatal(err)
	}
	return deploy.Generation
}
