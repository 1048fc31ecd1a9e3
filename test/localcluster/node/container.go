package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumkeeper/etcd-operator/test/localcluster/runtime"
)

// containerRun supervises one container of a Pod: start, wait, restart with back-off, probes.
type containerRun struct {
	pod  *podRun
	spec *corev1.Container
	init bool
	// fieldEnv are the variables worked out from the Pod at every start (see fieldEnv).
	fieldEnv []corev1.EnvVar

	mu       sync.Mutex
	proc     *runtime.Container
	state    corev1.ContainerState
	last     corev1.ContainerState
	restarts int32
	ready    bool
	started  bool // the startup probe (if any) has succeeded
	stopping bool
	imageID  string // what the image reference resolved to at the last start
}

func newContainerRun(pod *podRun, spec *corev1.Container, init bool, declared *corev1.Pod) *containerRun {
	return &containerRun{pod: pod, spec: spec, init: init, fieldEnv: fieldEnv(declared, spec.Name), state: waiting("ContainerCreating", "")}
}

func waiting(reason, message string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
}

const maxBackoff = 20 * time.Second

// supervise keeps a regular container running according to the Pod's restart policy.
func (c *containerRun) supervise(ctx context.Context) {
	c.runWithRestarts(ctx, c.shouldRestart)
}

// runToCompletion runs an init container until it succeeds; false when it failed for good or
// the Pod went.
func (c *containerRun) runToCompletion(ctx context.Context) bool {
	code, ok := c.runWithRestarts(ctx, func(code int) bool {
		return code != 0 && c.pod.pod.Spec.RestartPolicy != corev1.RestartPolicyNever
	})
	if !ok || code == 0 {
		return ok && code == 0
	}
	c.pod.mu.Lock()
	c.pod.failed = true
	c.pod.mu.Unlock()
	c.pod.changed()
	return false
}

// runWithRestarts runs the container until again(exit code) says no, with a back-off between
// runs that doubles up to maxBackoff and starts over after a run of a minute. It returns the
// last exit code, or false when the Pod went first.
func (c *containerRun) runWithRestarts(ctx context.Context, again func(code int) bool) (int, bool) {
	backoff := time.Second
	for {
		code, ran, startErr := c.runOnce(ctx)
		if ctx.Err() != nil {
			return code, false
		}
		if startErr != nil {
			// Not started at all (image, config): retry without counting a restart, keeping
			// the reason in the status as a kubelet does.
			if !sleep(ctx, 2*time.Second) {
				return code, false
			}
			continue
		}
		if !again(code) {
			return code, true
		}
		if ran > time.Minute {
			backoff = time.Second
		}
		c.setState(waiting("CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container %s", backoff, c.spec.Name)))
		if !sleep(ctx, backoff) {
			return code, false
		}
		backoff = min(2*backoff, maxBackoff)
		c.mu.Lock()
		c.restarts++
		c.mu.Unlock()
	}
}

func (c *containerRun) shouldRestart(code int) bool {
	switch c.pod.pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

// runOnce starts the container, runs its probes and waits for it to exit. It returns the exit
// code and how long it ran, or why it could not be started.
func (c *containerRun) runOnce(ctx context.Context) (int, time.Duration, error) {
	spec, err := c.containerSpec(ctx)
	if err != nil {
		c.setState(waiting(startFailureReason(err), err.Error()))
		return 0, 0, err
	}
	proc, err := runtime.Start(spec)
	if err != nil {
		c.terminated(128, "StartError", err.Error(), time.Now())
		return 128, 0, nil
	}
	began := time.Now()
	c.mu.Lock()
	c.proc = proc
	c.started = c.spec.StartupProbe == nil
	c.ready = false
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(began)}}
	stopping := c.stopping
	c.mu.Unlock()
	if stopping {
		_ = proc.Signal(syscall.SIGKILL)
	}
	c.pod.changed()

	probeCtx, stopProbes := context.WithCancel(ctx)
	go c.probe(probeCtx, proc)
	code, _ := proc.Wait()
	stopProbes()
	c.terminated(code, exitReason(code), c.terminationMessage(code), began)
	return code, time.Since(began), nil
}

func exitReason(code int) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}

// startFailureReason maps a failure before start to the waiting reason kubectl users know.
func startFailureReason(err error) string {
	var pull *pullError
	if errors.As(err, &pull) {
		return "ErrImagePull"
	}
	return "CreateContainerConfigError"
}

func (c *containerRun) terminated(code int, reason, message string, began time.Time) {
	c.mu.Lock()
	c.last = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: int32(code), Reason: reason, Message: message,
		StartedAt: metav1.NewTime(began), FinishedAt: metav1.Now(), ContainerID: c.containerID(),
	}}
	c.state = c.last
	c.ready = false
	c.proc = nil
	c.mu.Unlock()
	c.pod.changed()
}

func (c *containerRun) setState(state corev1.ContainerState) {
	c.mu.Lock()
	c.state = state
	c.mu.Unlock()
	c.pod.changed()
}

func (c *containerRun) setReady(ready bool) {
	c.mu.Lock()
	changed := c.ready != ready
	c.ready = ready
	c.mu.Unlock()
	if changed {
		c.pod.changed()
	}
}

func (c *containerRun) setStarted() {
	c.mu.Lock()
	c.started = true
	c.mu.Unlock()
	c.pod.changed()
}

// stop ends the container: SIGTERM, then SIGKILL after the grace period.
func (c *containerRun) stop(grace time.Duration) {
	c.mu.Lock()
	c.stopping = true
	proc := c.proc
	c.mu.Unlock()
	if proc != nil {
		proc.Stop(grace)
	}
}

func (c *containerRun) current() *runtime.Container {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc
}

func (c *containerRun) containerID() string {
	return fmt.Sprintf("local://%s-%s", c.pod.pod.UID, c.spec.Name)
}

func (c *containerRun) stateDir() string {
	return filepath.Join(c.pod.dir, "containers", c.spec.Name)
}

func (c *containerRun) logPath(restart int32) string {
	return filepath.Join(c.stateDir(), fmt.Sprintf("%d.log", restart))
}

func (c *containerRun) terminationLogPath() string {
	return filepath.Join(c.stateDir(), "termination-log")
}

// terminationMessage reads what the container wrote to its termination-message file, or,
// with FallbackToLogsOnError, the tail of its log after a failure.
func (c *containerRun) terminationMessage(code int) string {
	if data, err := os.ReadFile(c.terminationLogPath()); err == nil && len(data) > 0 {
		return truncate(string(data), 4096)
	}
	if code == 0 || c.spec.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		return ""
	}
	c.mu.Lock()
	restarts := c.restarts
	c.mu.Unlock()
	data, err := os.ReadFile(c.logPath(restarts))
	if err != nil {
		return ""
	}
	return tailLines(string(data), 80, 2048)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func tailLines(s string, lines, maxBytes int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return truncate(strings.Join(parts, "\n"), maxBytes)
}
