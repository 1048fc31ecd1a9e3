package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// localclusterNetns is the network namespace the local cluster's node agent made for a Pod:
// "lc-" and the first 8 characters of its UID (test/localcluster/node, netsetup).
func localclusterNetns(pod *corev1.Pod) string { return "lc-" + string(pod.UID)[:8] }

// setLink turns the Pod side of a namespace's veth (eth0) down or up.
func setLink(ctx context.Context, netns, state string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "-n", netns, "link", "set", "dev", "eth0", state).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip -n %s link set dev eth0 %s: %w: %s", netns, state, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitPodsReady waits until n member Pods are there, Ready and not going away.
func (c *cluster) waitPodsReady(ctx context.Context, n int) error {
	return poll(ctx, 5*time.Minute, fmt.Sprintf("%d member Pods Ready", n), func(ctx context.Context) error {
		pods, err := c.pods(ctx)
		if err != nil {
			return err
		}
		ready := 0
		for i := range pods {
			if pods[i].DeletionTimestamp.IsZero() && robustness.PodReady(&pods[i]) {
				ready++
			}
		}
		if ready != n || len(pods) != n {
			return fmt.Errorf("%d of %d Pods Ready", ready, len(pods))
		}
		return nil
	})
}
