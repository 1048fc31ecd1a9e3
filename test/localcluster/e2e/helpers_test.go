package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

const (
	toolboxImage = "localcluster/toolbox:v1"
	etcdImage    = "quay.io/coreos/etcd:v3.6.16"
	toolbox      = "/toolbox" // where the toolbox image puts its binary

	podStartTimeout = 90 * time.Second
	pollInterval    = 500 * time.Millisecond
	kubectlTimeout  = 60 * time.Second
)

// newNamespace creates a namespace for one test and deletes it when the test ends.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := "e2e-" + strings.ToLower(strings.TrimPrefix(t.Name(), "Test"))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(strings.ReplaceAll(name, "_", "-"), "-") + "-" + rand.String(5)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	// The API creates the default ServiceAccount asynchronously; Pods need it.
	eventually(t, 30*time.Second, "the default ServiceAccount of "+name, func() error {
		_, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err
	}, nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// toolboxPod is a Pod of one toolbox container running args, with a short grace period.
func toolboxPod(name string, args ...string) *corev1.Pod {
	grace := int64(2)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:  "main",
				Image: toolboxImage,
				Args:  args,
			}},
		},
	}
}

func createPod(t *testing.T, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, pod.Name, err)
	}
	return created
}

func getPod(ns, name string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
}

// waitPod polls the Pod until cond holds; on timeout the test fails with what was awaited,
// the Pod's last status and `kubectl describe pod`.
func waitPod(t *testing.T, ns, name string, limit time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	eventually(t, limit, fmt.Sprintf("pod %s/%s: %s", ns, name, what), func() error {
		pod, err := getPod(ns, name)
		if err != nil {
			return err
		}
		last = pod
		if !cond(pod) {
			return fmt.Errorf("not yet: phase %s, %s", pod.Status.Phase, containerSummary(pod))
		}
		return nil
	}, func() string { return describePod(ns, name) })
	return last
}

// waitRunningReady waits until the Pod runs and is Ready.
func waitRunningReady(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	return waitPod(t, ns, name, podStartTimeout, "Running and Ready", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && podReady(p)
	})
}

// waitPodGone waits until the Pod is no longer in the API.
func waitPodGone(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, podStartTimeout, fmt.Sprintf("pod %s/%s to be gone", ns, name), func() error {
		_, err := getPod(ns, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	}, func() string { return describePod(ns, name) })
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func containerSummary(p *corev1.Pod) string {
	var parts []string
	for _, s := range p.Status.ContainerStatuses {
		state := "unknown"
		switch {
		case s.State.Waiting != nil:
			state = "waiting " + s.State.Waiting.Reason + " " + s.State.Waiting.Message
		case s.State.Running != nil:
			state = "running"
		case s.State.Terminated != nil:
			state = fmt.Sprintf("terminated %s (exit %d)", s.State.Terminated.Reason, s.State.Terminated.ExitCode)
		}
		parts = append(parts, fmt.Sprintf("%s: %s, ready %t, restarts %d", s.Name, state, s.Ready, s.RestartCount))
	}
	if len(parts) == 0 {
		return "no container statuses"
	}
	return strings.Join(parts, "; ")
}

// eventually calls check every pollInterval until it returns nil; after limit the test fails
// with the last error and, if given, what diagnose returns.
func eventually(t *testing.T, limit time.Duration, what string, check func() error, diagnose func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("timed out after %s waiting for %s: %v", limit, what, err)
			if diagnose != nil {
				msg += "\n" + diagnose()
			}
			t.Fatal(msg)
		}
		time.Sleep(pollInterval)
	}
}

func describePod(ns, name string) string {
	res := kubectlRun(ns, "describe", "pod", name)
	return fmt.Sprintf("--- kubectl describe pod %s/%s (exit %d) ---\n%s%s", ns, name, res.code, res.stdout, res.stderr)
}

// kubectlResult is what one kubectl run gave.
type kubectlResult struct {
	stdout, stderr string
	code           int // -1 when it could not run or timed out
	err            error
}

func (r kubectlResult) String() string {
	return fmt.Sprintf("exit %d (%v)\nstdout:\n%s\nstderr:\n%s", r.code, r.err, r.stdout, r.stderr)
}

// kubectlRun runs kubectl against the local cluster in namespace ns (when not empty).
func kubectlRun(ns string, args ...string) kubectlResult {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	full := []string{"--kubeconfig", kubeconfig, "--request-timeout", "45s"}
	if ns != "" {
		full = append(full, "--namespace", ns)
	}
	cmd := exec.CommandContext(ctx, kubectlBin, append(full, args...)...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := kubectlResult{stdout: stdout.String(), stderr: stderr.String(), code: -1, err: err}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		res.err = fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), ctx.Err())
	case err == nil:
		res.code = 0
	case errors.As(err, &exitErr):
		res.code = exitErr.ExitCode()
	}
	return res
}

// kubectl runs kubectl and fails the test unless it succeeds.
func kubectl(t *testing.T, ns string, args ...string) string {
	t.Helper()
	res := kubectlRun(ns, args...)
	if res.code != 0 {
		t.Fatalf("kubectl %s: %s", strings.Join(args, " "), res)
	}
	return res.stdout
}

// execIn runs a command in the Pod's container through kubectl exec and fails the test
// unless it succeeds; it returns the command's standard output.
func execIn(t *testing.T, ns, pod string, argv ...string) string {
	t.Helper()
	res := kubectlRun(ns, append([]string{"exec", pod, "--"}, argv...)...)
	if res.code != 0 {
		t.Fatalf("kubectl exec %s -- %s: %s\n%s", pod, strings.Join(argv, " "), res, describePod(ns, pod))
	}
	return res.stdout
}

func ptr[T any](v T) *T { return &v }
