package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/quorumkeeper/etcd-operator/test/localcluster/runtime"
)

func (p *provider) container(namespace, podName, name string) (*containerRun, error) {
	run := p.lookup(namespace, podName)
	if run == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, podName)
	}
	for _, c := range append(append([]*containerRun{}, run.containers...), run.inits...) {
		if c.spec.Name == name || (name == "" && len(run.containers) == 1) {
			return c, nil
		}
	}
	return nil, errdefs.NotFoundf("pod %s/%s has no container %q", namespace, podName, name)
}

// GetContainerLogs serves kubectl logs: the current run's log or, with --previous, the one
// before; --tail and --follow are honoured.
func (p *provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	c, err := p.container(namespace, podName, containerName)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	restart := c.restarts
	c.mu.Unlock()
	if opts.Previous {
		if restart == 0 {
			return nil, errdefs.InvalidInputf("container %q has not been restarted", containerName)
		}
		restart--
	}
	data, err := os.ReadFile(c.logPath(restart))
	if err != nil {
		return nil, errdefs.NotFoundf("no log yet for container %q: %v", containerName, err)
	}
	text := string(data)
	if opts.Tail > 0 {
		text = tailLines(text, opts.Tail, len(text))
		if text != "" {
			text += "\n"
		}
	}
	if opts.LimitBytes > 0 && len(text) > opts.LimitBytes {
		text = text[:opts.LimitBytes]
	}
	if !opts.Follow {
		return io.NopCloser(strings.NewReader(text)), nil
	}
	return followLog(ctx, c.logPath(restart), int64(len(data)), text), nil
}

// followLog streams what is already there, then what gets appended, until ctx ends.
func followLog(ctx context.Context, path string, offset int64, head string) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		if _, err := io.WriteString(pw, head); err != nil {
			return
		}
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return
		}
		reader := bufio.NewReader(f)
		for ctx.Err() == nil {
			chunk, err := reader.ReadString('\n')
			if chunk != "" {
				if _, werr := io.WriteString(pw, chunk); werr != nil {
					return
				}
			}
			if err != nil {
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	return pr
}

// logAppender writes a line of the node agent's own into the container's current log.
func logAppender(c *containerRun) io.Writer {
	c.mu.Lock()
	restart := c.restarts
	c.mu.Unlock()
	f, err := os.OpenFile(c.logPath(restart), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return io.Discard
	}
	return closingWriter{f}
}

type closingWriter struct{ f *os.File }

func (w closingWriter) Write(b []byte) (int, error) {
	defer w.f.Close()
	return w.f.Write(b)
}

// RunInContainer serves kubectl exec.
func (p *provider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	c, err := p.container(namespace, podName, containerName)
	if err != nil {
		return err
	}
	proc := c.current()
	if proc == nil {
		return errdefs.InvalidInputf("container %q is not running", containerName)
	}
	opts := runtime.ExecOptions{Stdout: attach.Stdout(), Stderr: attach.Stderr(), TTY: attach.TTY()}
	if in := attach.Stdin(); in != nil {
		opts.Stdin = in
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Stderr == nil {
		opts.Stderr = opts.Stdout
	}
	code, err := runtime.Exec(ctx, proc, cmd, opts)
	if err != nil {
		return err
	}
	if code != 0 {
		return exitError(code)
	}
	return nil
}

// exitError carries a command's exit code back through the exec stream; kubectl exec exits
// with the same code.
type exitError int

func (e exitError) Error() string   { return fmt.Sprintf("command terminated with exit code %d", int(e)) }
func (e exitError) String() string  { return e.Error() }
func (e exitError) Exited() bool    { return true }
func (e exitError) ExitStatus() int { return int(e) }

// AttachToContainer is not offered: containers here have no attachable console.
func (p *provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errdefs.InvalidInput("attach is not supported by this local cluster; use kubectl logs -f or kubectl exec")
}

// PortForward serves kubectl port-forward by dialing the Pod's address from the host.
func (p *provider) PortForward(ctx context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error {
	run := p.lookup(namespace, podName)
	if run == nil {
		return errdefs.NotFoundf("pod %s/%s is not on this node", namespace, podName)
	}
	defer stream.Close()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(run.ip.String(), strconv.Itoa(int(port))))
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

// GetStatsSummary reports the node with no usage figures: nothing here measures them.
func (p *provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: p.cfg.NodeName}}, nil
}

// GetMetricsResource reports no resource metrics.
func (p *provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, nil
}
