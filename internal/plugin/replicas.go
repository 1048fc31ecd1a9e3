package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func newPauseCommand(o *Options) *cobra.Command {
	return o.command("pause CLUSTER", "Stop every member (spec.replicas 0); data and identities stay for resume",
		cobra.ExactArgs(1), 0, o.withCluster(func(ctx context.Context, k *Kube, c *etcdv1.EtcdCluster) error {
			n := replicasOf(c)
			if n == 0 {
				return fmt.Errorf("cluster %s is already paused", c.Name)
			}
			if err := patchReplicas(ctx, k, c, 0, map[string]any{etcdv1.AnnotationPausedReplicas: strconv.Itoa(int(n))}); err != nil {
				return err
			}
			say(o.Out, "paused %s (%d members; kubectl etcd resume %s brings them back)\n", c.Name, n, c.Name)
			return nil
		}))
}

func newResumeCommand(o *Options) *cobra.Command {
	var replicas int32
	cmd := o.command("resume CLUSTER", "Start a paused cluster again with the member count it had",
		cobra.ExactArgs(1), 0, o.withCluster(func(ctx context.Context, k *Kube, c *etcdv1.EtcdCluster) error {
			if replicasOf(c) != 0 {
				return fmt.Errorf("cluster %s is not paused (spec.replicas %d)", c.Name, replicasOf(c))
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
			say(o.Out, "resumed %s with %d members\n", c.Name, n)
			return nil
		}))
	cmd.Flags().Int32Var(&replicas, "replicas", 0, "member count when pause recorded none")
	return cmd
}

func newAddMemberCommand(o *Options) *cobra.Command {
	return scaleCommand(o, "add-member CLUSTER", "Add one member (spec.replicas + 1) if the cluster keeps its quorum", 1)
}

func newRemoveMemberCommand(o *Options) *cobra.Command {
	return scaleCommand(o, "remove-member CLUSTER", "Remove one member (spec.replicas - 1) if the cluster keeps its quorum", -1)
}

// scaleCommand changes spec.replicas by delta when checkScale allows it, or with --force.
func scaleCommand(o *Options, use, short string, delta int32) *cobra.Command {
	var force bool
	cmd := o.command(use, short, cobra.ExactArgs(1), 0, o.withCluster(func(ctx context.Context, k *Kube, c *etcdv1.EtcdCluster) error {
		current := replicasOf(c)
		if current == 0 {
			return fmt.Errorf("cluster %s is paused: kubectl etcd resume %s first", c.Name, c.Name)
		}
		target := current + delta
		if err := o.overridable(checkScale(int(current), int(target), int(c.Status.ReadyMembers)), force); err != nil {
			return err
		}
		if err := patchReplicas(ctx, k, c, target, nil); err != nil {
			return err
		}
		say(o.Out, "%s: spec.replicas %d -> %d; the operator does the change one member at a time\n", c.Name, current, target)
		return nil
	}))
	cmd.Flags().BoolVar(&force, "force", false, "change the member count even when the quorum could be lost")
	return cmd
}

// withCluster reads the cluster named by the first argument for run; no etcd connection.
func (o *Options) withCluster(run func(ctx context.Context, k *Kube, c *etcdv1.EtcdCluster) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		k, err := o.kube()
		if err != nil {
			return err
		}
		c, err := k.Cluster(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		return run(cmd.Context(), k, c)
	}
}

// overridable passes a refusal through, or with force only warns about it.
func (o *Options) overridable(refusal error, force bool) error {
	if refusal == nil {
		return nil
	}
	if !force {
		return fmt.Errorf("%w (--force does it anyway)", refusal)
	}
	say(o.Err, "WARNING: %v; going ahead because of --force\n", refusal)
	return nil
}

func replicasOf(c *etcdv1.EtcdCluster) int32 {
	if c.Spec.Replicas == nil {
		return 3
	}
	return *c.Spec.Replicas
}

// patchReplicas sets spec.replicas and annotations (nil deletes) in one patch (patchCluster).
func patchReplicas(ctx context.Context, k *Kube, c *etcdv1.EtcdCluster, n int32, annotations map[string]any) error {
	return patchCluster(ctx, k, c, annotations, map[string]any{"replicas": n})
}

// patchCluster sets annotations (nil deletes one) and spec fields (nil: none) in one merge
// patch that carries the resourceVersion read, so a concurrent change makes it fail instead
// of being overwritten.
func patchCluster(ctx context.Context, k *Kube, c *etcdv1.EtcdCluster, annotations, spec map[string]any) error {
	meta := map[string]any{"resourceVersion": c.ResourceVersion}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	patch := map[string]any{"metadata": meta}
	if spec != nil {
		patch["spec"] = spec
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := k.Client.Patch(ctx, c, client.RawPatch("application/merge-patch+json", body)); err != nil {
		return explainForbidden(err, "patch etcdclusters.etcd-operator.cozystack.io")
	}
	return nil
}
