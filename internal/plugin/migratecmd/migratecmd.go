package migratecmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/migrate"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// NewCmd is `kubectl etcd migrate cozystack|aenix|aenix-backups`.
func NewCmd(o *cli.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Take over, in place, clusters that another etcd operator runs",
	}
	cmd.AddCommand(newMigrateCozystackCommand(o), newMigrateAenixCommand(o), newMigrateAenixBackupsCommand(o))
	return cmd
}

type migrateFlags struct {
	apply        bool
	snapshotFile string
	skipSnapshot bool
	force        bool
}

// cozystackOperatorImage: see migrate.CozystackOperatorImage.
const cozystackOperatorImage = migrate.CozystackOperatorImage

func newMigrateCozystackCommand(o *cli.Options) *cobra.Command {
	f := &migrateFlags{}
	cmd := o.Command("cozystack CLUSTER",
		"Adopt a cluster of Cozystack's etcd-operator without restarting a Pod (a dry run unless --apply)",
		cobra.ExactArgs(1), 0, o.WithSession(func(cmd *cobra.Command, s *cli.Session, _ []string) error {
			return f.run(cmd.Context(), o, s)
		}))
	f.addFlags(cmd, "Cozystack's operator")
	return cmd
}

// addFlags adds the flags every migration takes; operator names the one it takes over from.
func (f *migrateFlags) addFlags(cmd *cobra.Command, operator string) {
	cmd.Flags().BoolVar(&f.force, "force", false, "adopt although a Deployment of "+operator+" may be running (it must not act on the cluster meanwhile)")
	cmd.Flags().BoolVar(&f.apply, "apply", false, "make the changes; without it, print what would change and change nothing")
	cmd.Flags().StringVar(&f.snapshotFile, "snapshot-file", "", "with --apply: save a snapshot of the cluster to this local file first")
	cmd.Flags().BoolVar(&f.skipSnapshot, "skip-snapshot", false, "with --apply: adopt without a safety snapshot")
}

func (f *migrateFlags) run(ctx context.Context, o *cli.Options, s *cli.Session) error {
	plan, err := planCozystack(ctx, s, f.force)
	if err != nil {
		return err
	}
	cli.Say(o.Out, "%s", plan.Describe())
	if len(plan.Refusals) == 0 && len(plan.Members) == 0 {
		cli.Say(o.Out, "nothing to do: every member of %s is adopted\n", plan.Cluster)
		return nil
	}
	if ok, err := f.goAhead(ctx, o, s, plan.Cluster, plan.Refusals, "Stop Cozystack's operator and install this operator's CRDs first"); !ok {
		return err
	}
	for _, change := range plan.Members {
		if err := adoptMember(ctx, s.Kube, change); err != nil {
			return fmt.Errorf("adopting member %s (the members before it are adopted; run the command again to continue): %w", change.Member, err)
		}
		cli.Say(o.Out, "adopted member %s\n", change.Member)
	}
	cli.Say(o.Out, "cluster %s adopted: this operator reconciles it from now on; its Pods were not restarted\n", plan.Cluster)
	return nil
}

// planCozystack reads what adoption decides on: the members, their Pods and PVCs, etcd's own
// member list, and whether Cozystack's operator still runs.
func planCozystack(ctx context.Context, s *cli.Session, force bool) (migrate.Plan, error) {
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := s.Kube.Client.List(ctx, pvcs, client.InNamespace(s.Kube.Namespace)); err != nil {
		return migrate.Plan{}, cli.ExplainForbidden(err, "list persistentvolumeclaims")
	}
	listCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, etcdMembers, err := s.Etcd.MemberList(listCtx)
	if err != nil {
		return migrate.Plan{}, fmt.Errorf("reading etcd's member list: %w", err)
	}
	o := migrate.Observed{Cluster: s.Cluster, Members: s.Members, Pods: map[string]*corev1.Pod{},
		PVCs: map[string]*corev1.PersistentVolumeClaim{}, Etcd: etcdMembers, Operator: runningOperators(ctx, s.Kube, cozystackOperatorImage)}
	o.Operator.Force = force
	secrets, err := podSecrets(ctx, s.Kube, s.Pods)
	if err != nil {
		return migrate.Plan{}, err
	}
	o.Secrets = secrets
	if o.Auth, err = observeCozystackAuth(ctx, s); err != nil {
		return migrate.Plan{}, err
	}
	for name, pod := range s.Pods {
		o.Pods[name] = &pod
	}
	for i := range pvcs.Items {
		o.PVCs[pvcs.Items[i].Name] = &pvcs.Items[i]
	}
	return migrate.PlanCozystack(o), nil
}

// goAhead says whether a migration whose plan the command has printed makes its changes:
// not with refusals (an error), not without --apply (a dry run, which says what to do first),
// and not before the safety snapshot is saved.
func (f *migrateFlags) goAhead(ctx context.Context, o *cli.Options, s *cli.Session, cluster string, refusals []string, first string) (bool, error) {
	if len(refusals) > 0 {
		return false, fmt.Errorf("not adopting %s: %d refusal(s) above; nothing was changed", cluster, len(refusals))
	}
	if !f.apply {
		cli.Say(o.Out, "dry run: nothing was changed. %s, then run again with --apply\n", first)
		return false, nil
	}
	if err := f.safetySnapshot(ctx, o, s); err != nil {
		return false, err
	}
	return true, nil
}

func (f *migrateFlags) safetySnapshot(ctx context.Context, o *cli.Options, s *cli.Session) error {
	if f.skipSnapshot {
		return nil
	}
	if f.snapshotFile == "" {
		return errors.New("--apply takes a safety snapshot first: name its local file with --snapshot-file FILE, or pass --skip-snapshot")
	}
	if err := s.SaveSnapshot(ctx, o.Out, f.snapshotFile); err != nil {
		return fmt.Errorf("safety snapshot (nothing was changed): %w", err)
	}
	return nil
}

// labelMemberObjects labels the member's PVC (when it has one, with where its data came from
// and lives) and its Pod (metadata only: the Pod is not restarted) as this operator's own, and
// returns the member's labels.
func labelMemberObjects(ctx context.Context, k *cli.Kube, change migrate.MemberChange) (map[string]string, error) {
	labels := specs.MemberLabels(change.Spec.ClusterName, change.Member)
	if change.PVC != "" {
		if err := patchMeta(ctx, k, change.PVC, &corev1.PersistentVolumeClaim{}, labels, map[string]string{
			etcdv1.AnnotationAdoptedFrom: string(change.Spec.Adopted.From),
			etcdv1.AnnotationDataDir:     change.Spec.Adopted.DataDir,
		}); err != nil {
			return nil, err
		}
	}
	if err := patchMeta(ctx, k, change.Pod, &corev1.Pod{}, labels, nil); err != nil {
		return nil, err
	}
	return labels, nil
}

// adoptMember labels the member's PVC and Pod, then rewrites its EtcdMember: that last write
// is the adoption (the operator acts on the member from then on), so a run cut short is
// finished by running the command again.
func adoptMember(ctx context.Context, k *cli.Kube, change migrate.MemberChange) error {
	labels, err := labelMemberObjects(ctx, k, change)
	if err != nil {
		return err
	}
	m := &etcdv1.EtcdMember{}
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: change.Member}, m); err != nil {
		return err
	}
	if !m.AdoptionPending() {
		return nil
	}
	m.Spec = change.Spec
	controllerutil.RemoveFinalizer(m, migrate.CozystackFinalizer)
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	for key, v := range labels {
		m.Labels[key] = v
	}
	if err := k.Client.Update(ctx, m); err != nil {
		return fmt.Errorf("rewriting EtcdMember %s (are this operator's CRDs installed? kubectl apply -f config/crd/bases): %w", m.Name, err)
	}
	return recordMemberID(ctx, k, m, change.MemberID)
}

// recordMemberID writes the ID etcd knows an adopted member by into its status.
func recordMemberID(ctx context.Context, k *cli.Kube, m *etcdv1.EtcdMember, id string) error {
	if m.Status.MemberID == id {
		return nil
	}
	patch := client.MergeFrom(m.DeepCopy())
	m.Status.MemberID = id
	return k.Client.Status().Patch(ctx, m, patch)
}

// patchMeta adds labels and annotations to an object: metadata only, so a Pod keeps running.
func patchMeta(ctx context.Context, k *cli.Kube, name string, obj client.Object, labels, annotations map[string]string) error {
	return patchNamed(ctx, k, name, obj, func() error {
		obj.SetLabels(merged(obj.GetLabels(), labels))
		obj.SetAnnotations(merged(obj.GetAnnotations(), annotations))
		return nil
	})
}

// readInto reads the named object and hands it to found; a missing one is no error.
func readInto(ctx context.Context, k *cli.Kube, name string, obj client.Object, verb string, found func(client.Object)) error {
	err := k.Client.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: name}, obj)
	switch {
	case err == nil:
		found(obj)
	case !apierrors.IsNotFound(err):
		return cli.ExplainForbidden(err, verb)
	}
	return nil
}

// patchNamed reads the named object into obj, lets change change it and patches what changed.
func patchNamed(ctx context.Context, k *cli.Kube, name string, obj client.Object, change func() error) error {
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: name}, obj); err != nil {
		return err
	}
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	if err := change(); err != nil {
		return err
	}
	return k.Client.Patch(ctx, obj, patch)
}

func merged(into, add map[string]string) map[string]string {
	if len(add) == 0 {
		return into
	}
	if into == nil {
		into = map[string]string{}
	}
	for key, v := range add {
		into[key] = v
	}
	return into
}

// podSecrets reads the Secrets the Pods mount (their TLS certificates), by name: adoption
// checks them the way this operator will use them. A missing one is left out.
func podSecrets(ctx context.Context, k *cli.Kube, pods map[string]corev1.Pod) (map[string]map[string][]byte, error) {
	out := map[string]map[string][]byte{}
	for _, pod := range pods {
		for _, v := range pod.Spec.Volumes {
			if v.Secret == nil || out[v.Secret.SecretName] != nil {
				continue
			}
			if err := readInto(ctx, k, v.Secret.SecretName, &corev1.Secret{}, "get secrets", func(obj client.Object) {
				out[obj.GetName()] = obj.(*corev1.Secret).Data
			}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
