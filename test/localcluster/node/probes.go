package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/quorumkeeper/etcd-operator/test/localcluster/runtime"
)

// probe runs the startup probe until it passes, then liveness and readiness, for one run of
// the container. A failed liveness probe kills the container; supervise restarts it.
func (c *containerRun) probe(ctx context.Context, proc *runtime.Container) {
	if c.init {
		return
	}
	if p := c.spec.StartupProbe; p != nil {
		if !c.await(ctx, p, proc) {
			if ctx.Err() == nil {
				c.kill(proc, "startup probe failed")
			}
			return
		}
		c.setStarted()
	}
	if c.spec.LivenessProbe != nil {
		go c.watchLiveness(ctx, proc)
	}
	if c.spec.ReadinessProbe == nil {
		c.setReady(true)
		return
	}
	c.watchReadiness(ctx, proc)
}

// await runs a probe until it succeeds (true) or fails failureThreshold times in a row.
func (c *containerRun) await(ctx context.Context, p *corev1.Probe, proc *runtime.Container) bool {
	failures := int32(0)
	if !sleep(ctx, seconds(p.InitialDelaySeconds, 0)) {
		return false
	}
	for {
		if c.check(ctx, p, proc) == nil {
			return true
		}
		failures++
		if failures >= max(p.FailureThreshold, 1) {
			return false
		}
		if !sleep(ctx, seconds(p.PeriodSeconds, 10)) {
			return false
		}
	}
}

func (c *containerRun) watchLiveness(ctx context.Context, proc *runtime.Container) {
	p := c.spec.LivenessProbe
	for ctx.Err() == nil {
		if !c.await(ctx, p, proc) {
			if ctx.Err() == nil {
				c.kill(proc, "liveness probe failed")
			}
			return
		}
		if !sleep(ctx, seconds(p.PeriodSeconds, 10)) {
			return
		}
	}
}

func (c *containerRun) watchReadiness(ctx context.Context, proc *runtime.Container) {
	p := c.spec.ReadinessProbe
	if !sleep(ctx, seconds(p.InitialDelaySeconds, 0)) {
		return
	}
	successes, failures := int32(0), int32(0)
	for {
		if err := c.check(ctx, p, proc); err == nil {
			successes, failures = successes+1, 0
			if successes >= max(p.SuccessThreshold, 1) {
				c.setReady(true)
			}
		} else {
			successes, failures = 0, failures+1
			if failures >= max(p.FailureThreshold, 1) {
				c.setReady(false)
			}
		}
		if !sleep(ctx, seconds(p.PeriodSeconds, 10)) {
			return
		}
	}
}

func (c *containerRun) kill(proc *runtime.Container, why string) {
	c.mu.Lock()
	c.ready = false
	c.mu.Unlock()
	_, _ = fmt.Fprintf(logAppender(c), "[local-cluster] %s: killing the container\n", why)
	grace := 30 * time.Second
	if c.pod.pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*c.pod.pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	go proc.Stop(grace)
}

func seconds(v, fallback int32) time.Duration {
	if v <= 0 {
		v = fallback
	}
	return time.Duration(v) * time.Second
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// check runs one probe attempt within its timeout.
func (c *containerRun) check(ctx context.Context, p *corev1.Probe, proc *runtime.Container) error {
	ctx, cancel := context.WithTimeout(ctx, seconds(p.TimeoutSeconds, 1))
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		return c.checkHTTP(ctx, p.HTTPGet)
	case p.TCPSocket != nil:
		return c.checkTCP(ctx, p.TCPSocket)
	case p.Exec != nil:
		code, err := runtime.Exec(ctx, proc, p.Exec.Command, runtime.ExecOptions{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
		if err == nil && code != 0 {
			err = fmt.Errorf("exit code %d", code)
		}
		return err
	}
	return fmt.Errorf("probe type not supported by this local cluster")
}

func (c *containerRun) checkHTTP(ctx context.Context, get *corev1.HTTPGetAction) error {
	port, err := c.resolvePort(get.Port)
	if err != nil {
		return err
	}
	scheme := "http"
	if get.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	host := c.pod.ip.String()
	if get.Host != "" {
		host = get.Host
	}
	u := probeURL(scheme, net.JoinHostPort(host, strconv.Itoa(port)), get.Path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	for _, h := range get.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	// Like the kubelet, probes do not verify the serving certificate.
	transport := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true} //nolint:gosec
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

func (c *containerRun) checkTCP(ctx context.Context, tcp *corev1.TCPSocketAction) error {
	port, err := c.resolvePort(tcp.Port)
	if err != nil {
		return err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(c.pod.ip.String(), strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return conn.Close()
}

// resolvePort turns a named port into the container's port number.
func (c *containerRun) resolvePort(port intstr.IntOrString) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.spec.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.spec.Name, port.StrVal)
}

// probeURL is the probe's URL as the kubelet makes it: the path may carry a query
// ("/readyz?serializable=false", which the legacy etcd.aenix.io operator's startup probe
// uses), which must reach the server as a query, not escaped into the path.
func probeURL(scheme, hostPort, path string) *url.URL {
	u, err := url.Parse(path)
	if err != nil {
		u = &url.URL{Path: path}
	}
	u.Scheme, u.Host = scheme, hostPort
	return u
}
