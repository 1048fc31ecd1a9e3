package restorecmd

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// NewCmd is `kubectl etcd restore`.
func NewCmd(o *cli.Options) *cobra.Command {
	var schedule, to, version string
	var replicas int32
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "restore NEW-CLUSTER --from-schedule SCHEDULE --to <RFC3339 time|revision>",
		Short: "Create a cluster restored to a revision or a time from a schedule's snapshots and archive (spec.archive)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if schedule == "" || to == "" {
				return errors.New("--from-schedule and --to are needed")
			}
			target, err := ParseTarget(to)
			if err != nil {
				return err
			}
			k, err := o.Kube()
			if err != nil {
				return err
			}
			c, wait, err := plan(cmd.Context(), k, args[0], schedule, version, replicas, target)
			if err != nil {
				return err
			}
			if wait != "" {
				cli.Say(o.Err, "%s\n", wait)
			}
			if !dryRun {
				if err := k.Client.Create(cmd.Context(), c); err != nil {
					return cli.ExplainForbidden(err, "create etcdclusters.etcd-operator.cozystack.io")
				}
				cli.Say(o.Err, "created EtcdCluster %s, restoring to %s from EtcdSnapshotSchedule %s; follow it with kubectl etcd status %s\n", c.Name, describe(target), schedule, c.Name)
			}
			return o.Print(cli.Printout{Value: c, Names: cli.Named("etcdcluster."+etcdv1.GroupVersion.Group, c.Name), Table: func(w *tabwriter.Writer, _ bool) {
				cli.Row(w, "%s\t%s\t%d replicas\tetcd %s\n", c.Name, describe(target), cli.Replicas(c), c.Spec.Version)
			}})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&schedule, "from-schedule", "", "the EtcdSnapshotSchedule (with spec.archive) whose snapshots and archive reach the target")
	fl.StringVar(&to, "to", "", "the target: an RFC 3339 time (whole seconds, 2026-12-02T10:15:00Z) or a revision")
	fl.StringVar(&version, "version", "", "etcd version of the new cluster (default: the schedule's cluster's)")
	fl.Int32Var(&replicas, "replicas", 0, "members of the new cluster (default: the schedule's cluster's)")
	fl.BoolVar(&dryRun, "dry-run", false, "print the EtcdCluster, create nothing")
	return cmd
}

// plan reads the schedule and its cluster and makes the new cluster; wait says the restore
// will wait for the archive.
func plan(ctx context.Context, k *cli.Kube, name, schedule, version string, replicas int32, target etcdv1.RestoreTarget) (*etcdv1.EtcdCluster, string, error) {
	sc := &etcdv1.EtcdSnapshotSchedule{}
	if err := k.Client.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: schedule}, sc); err != nil {
		return nil, "", fmt.Errorf("EtcdSnapshotSchedule %s: %w", schedule, err)
	}
	wait, err := CheckWindow(sc, target)
	if err != nil {
		return nil, "", err
	}
	var src *etcdv1.EtcdCluster
	have := &etcdv1.EtcdCluster{}
	switch err := k.Client.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: sc.Spec.ClusterRef.Name}, have); {
	case err == nil:
		src = have
	case !apierrors.IsNotFound(err):
		return nil, "", err
	}
	c, err := RestoredCluster(src, k.Namespace, name, schedule, version, replicas, target)
	return c, wait, err
}
