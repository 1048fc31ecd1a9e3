package discarded

import (
	"context"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// discardedRow is one PVC holding the data of a member a quorum-loss recovery discarded.
type discardedRow struct {
	PVC       string `json:"pvc"`
	Member    string `json:"member"`
	MemberID  string `json:"memberID,omitempty"`
	ClusterID string `json:"clusterID,omitempty"`
	KeptSince string `json:"keptSince"`
	pvc       *corev1.PersistentVolumeClaim
}

// discardedOf picks, from a cluster's labelled PVCs, those the operator kept as discarded
// data and made itself (its managed-by label), in name order.
func discardedOf(pvcs []corev1.PersistentVolumeClaim) []discardedRow {
	var out []discardedRow
	for i := range pvcs {
		pvc := &pvcs[i]
		since := pvc.Annotations[etcdv1.AnnotationDiscardedByRecovery]
		if since == "" || pvc.Labels[etcdv1.LabelManagedBy] != specs.ManagerName || !pvc.DeletionTimestamp.IsZero() {
			continue
		}
		out = append(out, discardedRow{PVC: pvc.Name, Member: pvc.Labels[etcdv1.LabelMember], MemberID: pvc.Annotations[etcdv1.AnnotationMemberID],
			ClusterID: pvc.Annotations[etcdv1.AnnotationClusterID], KeptSince: since, pvc: pvc})
	}
	slices.SortFunc(out, func(a, b discardedRow) int { return strings.Compare(a.PVC, b.PVC) })
	return out
}

// NewCmd is `kubectl etcd discarded`.
func NewCmd(o *cli.Options) *cobra.Command {
	var release bool
	cmd := o.Command("discarded CLUSTER", "List the PVCs a quorum-loss recovery kept with the discarded members' data; --delete lets them go",
		cobra.ExactArgs(1), 0, o.WithCluster(func(ctx context.Context, k *cli.Kube, c *etcdv1.EtcdCluster) error {
			list := &corev1.PersistentVolumeClaimList{}
			if err := k.Client.List(ctx, list, client.InNamespace(k.Namespace), client.MatchingLabels{etcdv1.LabelCluster: c.Name}); err != nil {
				return cli.ExplainForbidden(err, "list persistentvolumeclaims")
			}
			rows := discardedOf(list.Items)
			if release {
				return deleteDiscarded(ctx, o, k, rows)
			}
			return o.Print(discardedPrintout(rows, meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionDiscardedDataKept)))
		}))
	cmd.Flags().BoolVar(&release, "delete", false, "delete the kept PVCs (their data is gone for good)")
	return cmd
}

// discardedPrintout is the kept PVCs for -o: the table (wide adds each one's etcd cluster ID)
// with the DiscardedDataKept condition's word under it, JSON or YAML of the rows, or the
// PVCs' names.
func discardedPrintout(rows []discardedRow, cond *metav1.Condition) cli.Printout {
	names := make([]string, 0, len(rows))
	for _, r := range rows {
		names = append(names, r.PVC)
	}
	return cli.Printout{Value: rows, Names: cli.Named(cli.ResourcePVC, names...), Table: func(w *tabwriter.Writer, wide bool) {
		head, extra := "", func(discardedRow) string { return "" }
		if wide {
			head, extra = "\tCLUSTER ID", func(r discardedRow) string { return "\t" + cli.Dash(r.ClusterID) }
		}
		cli.Row(w, "PVC\tMEMBER\tMEMBER ID\tKEPT SINCE%s\n", head)
		for _, r := range rows {
			cli.Row(w, "%s\t%s\t%s\t%s%s\n", r.PVC, r.Member, r.MemberID, r.KeptSince, extra(r))
		}
		if cond != nil {
			cli.Row(w, "\n%s\n", cond.Message)
		}
	}}
}

// deleteDiscarded deletes each kept PVC, that very object (its UID), and says so.
func deleteDiscarded(ctx context.Context, o *cli.Options, k *cli.Kube, rows []discardedRow) error {
	if len(rows) == 0 {
		cli.Say(o.Out, "no kept PVC of discarded data\n")
		return nil
	}
	for _, r := range rows {
		if err := k.Client.Delete(ctx, r.pvc, client.Preconditions{UID: &r.pvc.UID}); client.IgnoreNotFound(err) != nil {
			return cli.ExplainForbidden(err, "delete persistentvolumeclaims")
		}
		cli.Say(o.Out, "deleted PVC %s (data of member %s, kept since %s)\n", r.PVC, r.Member, r.KeptSince)
	}
	return nil
}
