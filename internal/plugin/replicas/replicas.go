package replicas

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// NewPauseCmd is `kubectl etcd pause`.
func NewPauseCmd(o *cli.Options) *cobra.Command {
	return o.Command("pause CLUSTER", "Stop every member (spec.replicas 0); data and identities stay for resume",
		cobra.ExactArgs(1), 0, o.WithCluster(func(ctx context.Context, k *cli.Kube, c *etcdv1.EtcdCluster) error {
			n := cli.Replicas(c)
			if n == 0 {
				return fmt.Errorf("cluster %s is already paused", c.Name)
			}
			if err := patchReplicas(ctx, k, c, 0, map[string]any{etcdv1.AnnotationPausedReplicas: strconv.Itoa(int(n))}); err != nil {
				return err
			}
			cli.Say(o.Out, "paused %s (%d members; kubectl etcd resume %s brings them back)\n", c.Name, n, c.Name)
			return nil
		}))
}

// NewResumeCmd is `kubectl etcd resume`.
func NewResumeCmd(o *cli.Options) *cobra.Command {
	var replicas int32
	cmd := o.Command("resume CLUSTER", "Start a paused cluster again with the member count it had",
		cobra.ExactArgs(1), 0, o.WithCluster(func(ctx context.Context, k *cli.Kube, c *etcdv1.EtcdCluster) error {
			if cli.Replicas(c) != 0 {
				return fmt.Errorf("cluster %s is not paused (spec.replicas %d)", c.Name, cli.Replicas(c))
			}
			n, err := resumeReplicas(c.Annotations[etcdv1.AnnotationPausedReplicas], replicas)
			if err != nil {
				return err
			}
			if n < 1 {
				return fmt.Errorf("cluster %s has no recorded size (annotation %s): pass --replicas N", c.Name, etcdv1.AnnotationPausedReplicas)
			}
			if err := patchReplicas(ctx, k, c, n, map[string]any{etcdv1.AnnotationPausedReplicas: nil}); err != nil {
				return err
			}
			cli.Say(o.Out, "resumed %s with %d members\n", c.Name, n)
			return nil
		}))
	cmd.Flags().Int32Var(&replicas, "replicas", 0, "member count when pause recorded none")
	return cmd
}

// NewAddMemberCmd is `kubectl etcd add-member`.
func NewAddMemberCmd(o *cli.Options) *cobra.Command {
	return scaleCommand(o, "add-member CLUSTER", "Add one member (spec.replicas + 1) if the cluster keeps its quorum", 1)
}

// NewRemoveMemberCmd is `kubectl etcd remove-member`.
func NewRemoveMemberCmd(o *cli.Options) *cobra.Command {
	return scaleCommand(o, "remove-member CLUSTER", "Remove one member (spec.replicas - 1) if the cluster keeps its quorum", -1)
}

// scaleCommand changes spec.replicas by delta when checkScale allows it, or with --force.
func scaleCommand(o *cli.Options, use, short string, delta int32) *cobra.Command {
	var force bool
	cmd := o.Command(use, short, cobra.ExactArgs(1), 0, o.WithCluster(func(ctx context.Context, k *cli.Kube, c *etcdv1.EtcdCluster) error {
		current := cli.Replicas(c)
		if current == 0 {
			return fmt.Errorf("cluster %s is paused: kubectl etcd resume %s first", c.Name, c.Name)
		}
		target := current + delta
		if err := o.Overridable(checkScale(int(current), int(target), int(c.Status.ReadyMembers)), force); err != nil {
			return err
		}
		if err := patchReplicas(ctx, k, c, target, nil); err != nil {
			return err
		}
		cli.Say(o.Out, "%s: spec.replicas %d -> %d; the operator does the change one member at a time\n", c.Name, current, target)
		return nil
	}))
	cmd.Flags().BoolVar(&force, "force", false, "change the member count even when the quorum could be lost")
	return cmd
}

// patchReplicas sets spec.replicas and annotations (nil deletes) in one patch (Kube.PatchCluster).
func patchReplicas(ctx context.Context, k *cli.Kube, c *etcdv1.EtcdCluster, n int32, annotations map[string]any) error {
	return k.PatchCluster(ctx, c, annotations, map[string]any{"replicas": n})
}
