package migratecmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/migrate"
)

func newMigrateAenixBackupsCommand(o *cli.Options) *cobra.Command {
	var apply bool
	cmd := &cobra.Command{
		Use:   "aenix-backups",
		Short: "Import the legacy etcd.aenix.io EtcdBackups and EtcdBackupSchedules of the namespace as EtcdSnapshots and EtcdSnapshotSchedules (a dry run unless --apply)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAenixBackups(cmd.Context(), o, apply)
		},
	}
	cmd.Flags().BoolVar(&apply, "apply", false, "create the EtcdSnapshots and EtcdSnapshotSchedules; without it, print what would be created and change nothing")
	return cmd
}

func runAenixBackups(ctx context.Context, o *cli.Options, apply bool) error {
	k, err := o.Kube()
	if err != nil {
		return err
	}
	obs, err := observeBackups(ctx, k)
	if err != nil {
		return err
	}
	plan := migrate.PlanBackups(obs)
	cli.Say(o.Out, "legacy backups (%s) in namespace %s\n%s", migrate.LegacyBackupGroup, k.Namespace, plan.Describe())
	switch {
	case len(obs.Backups)+len(obs.Schedules) == 0:
		cli.Say(o.Out, "  none: nothing to do\n")
		return nil
	case len(plan.Refusals) > 0:
		return fmt.Errorf("not importing: %d refusal(s) above; nothing was changed", len(plan.Refusals))
	case !apply:
		cli.Say(o.Out, "dry run: nothing was changed. Run again with --apply\n")
		return nil
	}
	if err := applyBackups(ctx, o, k, plan); err != nil {
		return fmt.Errorf("importing (run the command again to continue from where it stopped): %w", err)
	}
	cli.Say(o.Out, "legacy backups imported; the legacy objects are left as they are: delete them once you no longer need them\n")
	return nil
}

// observeBackups reads the legacy backup objects of the namespace and this operator's objects
// of the same names. A legacy kind the API does not serve has no objects.
func observeBackups(ctx context.Context, k *cli.Kube) (migrate.BackupsObserved, error) {
	obs := migrate.BackupsObserved{Snapshots: map[string]*etcdv1.EtcdSnapshot{}, SnapshotSchedules: map[string]*etcdv1.EtcdSnapshotSchedule{}, Clusters: map[string]bool{}}
	served := 0
	for kind, into := range map[string]*[]map[string]any{"EtcdBackupList": &obs.Backups, "EtcdBackupScheduleList": &obs.Schedules} {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(migrate.LegacyBackupGroup)
		list.SetKind(kind)
		err := k.Client.List(ctx, list, client.InNamespace(k.Namespace))
		switch {
		case meta.IsNoMatchError(err):
			continue
		case err != nil:
			return obs, cli.ExplainForbidden(err, "list the legacy "+kind)
		}
		served++
		for _, item := range list.Items {
			*into = append(*into, item.Object)
		}
	}
	if served == 0 {
		return obs, errors.New("the API serves neither etcd.aenix.io/v1alpha1 EtcdBackup nor EtcdBackupSchedule: the legacy operator's CRDs are not installed here (wrong context?)")
	}
	snaps := &etcdv1.EtcdSnapshotList{}
	scheds := &etcdv1.EtcdSnapshotScheduleList{}
	clusters := &etcdv1.EtcdClusterList{}
	for _, l := range []client.ObjectList{snaps, scheds, clusters} {
		if err := k.Client.List(ctx, l, client.InNamespace(k.Namespace)); err != nil {
			return obs, cli.ExplainForbidden(err, "list this operator's EtcdSnapshots, EtcdSnapshotSchedules and EtcdClusters (are its CRDs installed?)")
		}
	}
	for i := range snaps.Items {
		obs.Snapshots[snaps.Items[i].Name] = &snaps.Items[i]
	}
	for i := range scheds.Items {
		obs.SnapshotSchedules[scheds.Items[i].Name] = &scheds.Items[i]
	}
	for _, c := range clusters.Items {
		obs.Clusters[c.Name] = true
	}
	return obs, nil
}

// applyBackups creates each EtcdSnapshot, then writes its status (Complete, its file): the
// operator runs no Job for it meanwhile (AnnotationImportedFrom). A run cut short between the
// two is finished by running again. Then the schedules.
func applyBackups(ctx context.Context, o *cli.Options, k *cli.Kube, plan migrate.BackupsPlan) error {
	for _, want := range plan.Snapshots {
		have := want.DeepCopy()
		have.Status = etcdv1.EtcdSnapshotStatus{}
		if err := k.Client.Create(ctx, have); apierrors.IsAlreadyExists(err) {
			if err := k.Client.Get(ctx, client.ObjectKeyFromObject(have), have); err != nil {
				return err
			}
			if have.Annotations[etcdv1.AnnotationImportedFrom] != want.Annotations[etcdv1.AnnotationImportedFrom] {
				return fmt.Errorf("EtcdSnapshot %s appeared meanwhile and is not the import of %s", have.Name, want.Annotations[etcdv1.AnnotationImportedFrom])
			}
		} else if err != nil {
			return fmt.Errorf("creating EtcdSnapshot %s: %w", want.Name, err)
		}
		patch := client.MergeFrom(have.DeepCopy())
		have.Status = *want.Status.DeepCopy()
		// The plan is pure; the time of the import is now. The CRD requires it on a condition.
		for i := range have.Status.Conditions {
			if have.Status.Conditions[i].LastTransitionTime.IsZero() {
				have.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		if err := k.Client.Status().Patch(ctx, have, patch); err != nil {
			return fmt.Errorf("recording the file of EtcdSnapshot %s: %w", want.Name, err)
		}
		cli.Say(o.Out, "imported EtcdSnapshot %s: %s\n", want.Name, want.Status.Artifact.URI)
	}
	for _, s := range plan.Schedules {
		if err := k.Client.Create(ctx, s.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating EtcdSnapshotSchedule %s: %w", s.Name, err)
		}
		cli.Say(o.Out, "created EtcdSnapshotSchedule %s\n", s.Name)
	}
	return nil
}
