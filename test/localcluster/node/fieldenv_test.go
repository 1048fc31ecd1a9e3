package node

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// A variable that names an annotation of its Pod (downward API) gets the annotation's value as
// the Pod is at each start of its container, as under a kubelet: an annotation changed on the
// running Pod (UpdatePod) reaches the container's next start, not the process that runs.
// virtual-kubelet hands CreatePod the environment already resolved, once: the node reads the
// Pod as declared from its informer cache.
func TestAnAnnotationChangedOnARunningPodReachesTheNextContainerStart(t *testing.T) {
	declared := helperPod("downward", 1, "env", "sleep=1h")
	declared.Annotations = map[string]string{"example.com/initial": "peers"}
	declared.Labels = map[string]string{"role": "learner"}
	declared.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "FROM_ANNOTATION", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['example.com/initial']"}}},
		{Name: "FROM_LABEL", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['role']"}}},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "PLAIN", Value: "kept"},
	}
	for _, tc := range []struct {
		name     string
		resolved bool // virtual-kubelet resolves the environment before CreatePod
	}{
		{name: "as virtual-kubelet hands it over", resolved: true},
		{name: "as declared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(declared)
			p := newTestProvider(t, client)
			given := declared
			if tc.resolved {
				indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
				if err := indexer.Add(declared); err != nil {
					t.Fatal(err)
				}
				p.declared = corev1listers.NewPodLister(indexer)
				given = resolvedAsVirtualKubeletDoes(declared)
			}
			if err := p.CreatePod(t.Context(), given); err != nil {
				t.Fatal(err)
			}
			waitForContainerRunning(t, p, declared)
			run := p.lookup(declared.Namespace, declared.Name).containers[0]
			first := waitForLog(t, run.logPath(0), "env=PLAIN=")
			updated := resolvedAsVirtualKubeletDoes(declared)
			updated.Annotations = map[string]string{"example.com/initial": "alone"}
			updated.Labels = map[string]string{"role": "voter"}
			running := run.current()
			if err := p.UpdatePod(t.Context(), updated); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			if run.current() != running {
				t.Fatal("UpdatePod restarted the container: a running container's environment never changes")
			}
			if err := run.current().Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			second := waitForLog(t, run.logPath(1), "env=PLAIN=")
			for _, want := range []string{"env=FROM_ANNOTATION=peers\n", "env=FROM_LABEL=learner\n", "env=POD_NAME=downward\n", "env=PLAIN=kept\n"} {
				if !strings.Contains(first, want) {
					t.Errorf("first start: no %q in\n%s", want, first)
				}
			}
			for _, want := range []string{"env=FROM_ANNOTATION=alone\n", "env=FROM_LABEL=voter\n", "env=POD_NAME=downward\n", "env=PLAIN=kept\n"} {
				if !strings.Contains(second, want) {
					t.Errorf("restart after the update: no %q in\n%s", want, second)
				}
			}
		})
	}
}

// resolvedAsVirtualKubeletDoes is pod as virtual-kubelet hands it to the provider: every
// variable a plain value, those that named a field of the Pod resolved from it as it is now.
func resolvedAsVirtualKubeletDoes(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	for i, e := range out.Spec.Containers[0].Env {
		if e.ValueFrom != nil {
			value, _ := podField(pod, e.ValueFrom.FieldRef.FieldPath)
			out.Spec.Containers[0].Env[i] = corev1.EnvVar{Name: e.Name, Value: value}
		}
	}
	return out
}

// waitForLog waits until the log at path has a line containing mark, and returns the log.
func waitForLog(t *testing.T, path, mark string) string {
	t.Helper()
	for range 300 {
		if data, err := os.ReadFile(path); err == nil && strings.Contains(string(data), mark) {
			return string(data)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s has no %q", path, mark)
	return ""
}
