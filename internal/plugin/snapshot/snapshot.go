package snapshot

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// snapshotFlags say where an EtcdSnapshot goes: an S3 bucket or a PVC.
type snapshotFlags struct {
	name                                  string
	s3Endpoint, s3Bucket, s3Key, s3Region string
	s3Credentials, s3ServiceAccount       string
	s3PathStyle                           bool
	pvc, pvcSubPath                       string
	timeout                               time.Duration
}

// NewCmd is `kubectl etcd snapshot` and `kubectl etcd snapshot save`.
func NewCmd(o *cli.Options) *cobra.Command {
	f := &snapshotFlags{}
	cmd := &cobra.Command{
		Use:   "snapshot CLUSTER (PATH | --s3-bucket ... | --pvc ...)",
		Short: "Take a snapshot through the operator (an EtcdSnapshot) and wait until it is stored; with PATH, stream one to a local file",
		Args:  cobra.RangeArgs(1, 2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 1 {
				return nil, cobra.ShellCompDirectiveDefault // PATH: a local file
			}
			return o.CompleteClusterThenMember(0)(cmd, args, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			local, err := f.localFile(args)
			if err != nil {
				return err
			}
			if local {
				return saveLocal(o)(cmd, args)
			}
			k, err := o.Kube()
			if err != nil {
				return err
			}
			if _, err := k.Cluster(cmd.Context(), args[0]); err != nil {
				return err
			}
			snap, err := f.object(k.Namespace, args[0])
			if err != nil {
				return err
			}
			if err := k.Client.Create(cmd.Context(), snap); err != nil {
				return cli.ExplainForbidden(err, "create etcdsnapshots.etcd-operator.cozystack.io")
			}
			cli.Say(o.Err, "created EtcdSnapshot %s, waiting up to %s\n", snap.Name, f.timeout)
			done, err := waitSnapshot(cmd.Context(), k, snap, f.timeout, newProgressView(o.Err))
			if err != nil {
				return err
			}
			return o.Print(snapshotPrintout(done))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "name of the EtcdSnapshot (default CLUSTER-<UTC time>)")
	fl.StringVar(&f.s3Endpoint, "s3-endpoint", "", "S3 endpoint URL, https://...")
	fl.StringVar(&f.s3Bucket, "s3-bucket", "", "S3 bucket")
	fl.StringVar(&f.s3Key, "s3-key", "", "S3 key (prefix) of the snapshot object")
	fl.StringVar(&f.s3Region, "s3-region", "", "S3 region")
	fl.StringVar(&f.s3Credentials, "s3-credentials-secret", "", "Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (default: the agent's cloud identity)")
	fl.StringVar(&f.s3ServiceAccount, "s3-service-account", "", "ServiceAccount the agent runs as, for workload identity (IRSA, GKE)")
	fl.BoolVar(&f.s3PathStyle, "s3-force-path-style", false, "path-style S3 URLs (MinIO, Ceph)")
	fl.StringVar(&f.pvc, "pvc", "", "PersistentVolumeClaim to store the snapshot on, instead of S3")
	fl.StringVar(&f.pvcSubPath, "pvc-sub-path", "", "path of the snapshot inside the PVC")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "how long to wait for the snapshot")
	cmd.AddCommand(newSnapshotSaveCommand(o))
	return cmd
}

// object is the EtcdSnapshot the flags describe.
func (f *snapshotFlags) object(namespace, cluster string) (*etcdv1.EtcdSnapshot, error) {
	name := f.name
	if name == "" {
		name = fmt.Sprintf("%s-%s", cluster, time.Now().UTC().Format("20060102-150405"))
	}
	snap := &etcdv1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: cluster}},
	}
	switch {
	case (f.s3Bucket != "") == (f.pvc != ""):
		return nil, errors.New("name exactly one destination: --s3-bucket (with --s3-endpoint, and --s3-credentials-secret or --s3-service-account unless the nodes' role may write) or --pvc")
	case f.pvc != "":
		snap.Spec.Destination.PVC = &etcdv1.PVCSnapshotLocation{ClaimName: f.pvc, SubPath: f.pvcSubPath}
	default:
		snap.Spec.Destination.S3 = &etcdv1.S3SnapshotLocation{
			Endpoint: f.s3Endpoint, Bucket: f.s3Bucket, Key: f.s3Key, Region: f.s3Region, ForcePathStyle: f.s3PathStyle,
			CredentialsSecretRef: corev1.LocalObjectReference{Name: f.s3Credentials}, ServiceAccountName: f.s3ServiceAccount,
		}
	}
	return snap, nil
}

// waitSnapshot waits until the operator stored the snapshot or gave up, showing its progress
// on view (the agent writes it at most every 2 s, as often as this looks).
func waitSnapshot(ctx context.Context, k *cli.Kube, snap *etcdv1.EtcdSnapshot, timeout time.Duration, view *progressView) (*etcdv1.EtcdSnapshot, error) {
	got := &etcdv1.EtcdSnapshot{}
	defer view.end()
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := k.Client.Get(ctx, client.ObjectKeyFromObject(snap), got); err != nil {
			return false, err
		}
		view.show(got)
		return got.Status.Phase == etcdv1.SnapshotComplete || got.Status.Phase == etcdv1.SnapshotFailed, nil
	})
	if err != nil {
		return nil, fmt.Errorf("EtcdSnapshot %s is %q after %s: %w", snap.Name, got.Status.Phase, timeout, err)
	}
	if got.Status.Phase == etcdv1.SnapshotFailed || got.Status.Artifact == nil {
		msg := ""
		if c := meta.FindStatusCondition(got.Status.Conditions, "Ready"); c != nil {
			msg = c.Message
		}
		return nil, fmt.Errorf("EtcdSnapshot %s failed: %s", snap.Name, msg)
	}
	return got, nil
}

// snapshotPrintout is a stored snapshot for -o: one line (wide adds its revision, member
// and etcd version), JSON or YAML of its status, or its name.
func snapshotPrintout(done *etcdv1.EtcdSnapshot) cli.Printout {
	st := done.Status
	return cli.Printout{Value: st, Names: cli.Named(cli.ResourceEtcdSnapshot, done.Name), Table: func(w *tabwriter.Writer, wide bool) {
		cli.Row(w, "%s\t%s\t%d bytes\t%s", done.Name, st.Artifact.URI, st.Artifact.SizeBytes, st.Artifact.Checksum)
		if wide {
			cli.Row(w, "\trevision %d\t%s\tetcd %s", st.Revision, cli.Dash(st.Member), cli.Dash(st.EtcdVersion))
		}
		cli.Row(w, "\n")
	}}
}

// localFile says whether the command streams a snapshot to a local file: `snapshot CLUSTER
// PATH`, as Cozystack's plugin has `snapshot PATH`, is `snapshot save CLUSTER PATH`; a PATH
// and a destination of the operator's exclude each other.
func (f *snapshotFlags) localFile(args []string) (bool, error) {
	if len(args) < 2 {
		return false, nil
	}
	if f.s3Bucket != "" || f.pvc != "" {
		return false, fmt.Errorf("a local PATH (%s) and --s3-bucket or --pvc exclude each other: the first streams a snapshot here, the others have the operator store one", args[1])
	}
	return true, nil
}

func newSnapshotSaveCommand(o *cli.Options) *cobra.Command {
	return o.Command("save CLUSTER FILE", "Stream a snapshot from the leader to a local file",
		cobra.ExactArgs(2), 0, saveLocal(o))
}

// saveLocal streams a snapshot from the cluster's leader (args[0]) into the file args[1].
func saveLocal(o *cli.Options) func(*cobra.Command, []string) error {
	return o.WithSession(func(cmd *cobra.Command, s *cli.Session, args []string) error {
		return s.SaveSnapshot(cmd.Context(), o.Out, args[1])
	})
}
