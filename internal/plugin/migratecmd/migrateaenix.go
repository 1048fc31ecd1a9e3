package migratecmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/convert"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/migrate"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// legacyOperatorImage is in the image of every build of the legacy operator
// (ghcr.io/aenix-io/etcd-operator), whichever way it was installed.
const legacyOperatorImage = "aenix-io/etcd-operator"

type aenixFlags struct {
	migrateFlags
}

func newMigrateAenixCommand(o *cli.Options) *cobra.Command {
	f := &aenixFlags{}
	cmd := &cobra.Command{
		Use:   "aenix CLUSTER",
		Short: "Adopt a cluster of the legacy etcd.aenix.io/v1alpha1 operator without restarting a Pod (a dry run unless --apply)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd.Context(), o, args[0])
		},
	}
	f.addFlags(cmd, "the legacy operator")
	return cmd
}

func (f *aenixFlags) run(ctx context.Context, o *cli.Options, name string) error {
	k, err := o.Kube()
	if err != nil {
		return err
	}
	if done, err := finishAenix(ctx, o, k, name); done || err != nil {
		return err
	}
	obs, legacy, err := observeAenix(ctx, k, name)
	if err != nil {
		return err
	}
	obs.Operator.Force = f.force
	// etcd's member list, through the Pods: the session is that of the cluster as this
	// operator will see it, whose members are the StatefulSet's Pods.
	// With the legacy TLS translated: the CA of the server Secret, the legacy operator's
	// client certificate, as this operator will use them.
	sessionCluster := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.Namespace}}
	if res, err := convert.Legacy(obs.Legacy); err == nil {
		sessionCluster.Spec.TLS = res.Cluster.Spec.TLS
	}
	s := &cli.Session{Kube: k, Cluster: sessionCluster, Pods: map[string]corev1.Pod{}, Endpoints: map[string]string{}, Unreachable: map[string]error{}}
	for podName, pod := range obs.Pods {
		s.Members = append(s.Members, etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: podName}})
		s.Pods[podName] = *pod
	}
	// Unreachable etcd is one refusal among others (a certificate this operator cannot use
	// is the likely cause, which the plan names), not the only thing said.
	var unreachable error
	if len(s.Members) > 0 {
		if unreachable = s.Dial(ctx); unreachable == nil {
			defer s.Close()
			listCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, obs.Etcd, unreachable = s.Etcd.MemberList(listCtx)
			cancel()
			// With the legacy client certificate, as this operator will connect: no password.
			obs.Auth = observeAuth(ctx, s.Etcd)
		}
	}
	plan := migrate.PlanAenix(obs)
	cli.Say(o.Out, "%s", plan.Describe())
	if unreachable != nil {
		cli.Say(o.Out, "  etcd through the StatefulSet's Pods: %v\n", unreachable)
	}
	if ok, err := f.goAhead(ctx, o, s, name, plan.Refusals, "Stop the legacy operator, install this operator"); !ok {
		return err
	}
	if err := adoptAenix(ctx, o, k, plan, legacy); err != nil {
		return fmt.Errorf("adopting %s (run the command again to continue from where it stopped): %w", name, err)
	}
	cli.Say(o.Out, "cluster %s adopted: this operator reconciles it from now on; its Pods were not restarted. Clients: the Service %s still reaches the ready members; %s-client is this operator's client Service\n", name, name, name)
	return nil
}

// finishAenix finishes an --apply cut short after it deleted the legacy EtcdCluster: this
// operator's EtcdCluster exists and names the adopted members (AnnotationAdoptedSubdomain),
// and what is left is retireLegacy. done is false when there is no such adoption to finish.
func finishAenix(ctx context.Context, o *cli.Options, k *cli.Kube, name string) (bool, error) {
	if _, err := getLegacy(ctx, k, name); !apierrors.IsNotFound(err) {
		return false, nil
	}
	c := &etcdv1.EtcdCluster{}
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: name}, c); err != nil {
		return false, nil
	}
	if _, members := specs.AdoptedSubdomain(c); members == nil {
		return false, nil
	}
	cli.Say(o.Out, "the legacy EtcdCluster %s is gone and this operator's adopted it: finishing the adoption\n", name)
	if err := retireLegacy(ctx, o, k, c); err != nil {
		return true, err
	}
	cli.Say(o.Out, "cluster %s adopted\n", name)
	return true, nil
}

// observeAenix reads the legacy EtcdCluster and what the legacy operator built for it.
func observeAenix(ctx context.Context, k *cli.Kube, name string) (migrate.AenixObserved, *unstructured.Unstructured, error) {
	legacy, err := getLegacy(ctx, k, name)
	if err != nil {
		return migrate.AenixObserved{}, nil, err
	}
	obs := migrate.AenixObserved{Legacy: legacy.Object, Pods: map[string]*corev1.Pod{}, PVCs: map[string]*corev1.PersistentVolumeClaim{},
		ConfigMaps: map[string]map[string]string{}, Secrets: map[string]map[string][]byte{}}
	sts := &appsv1.StatefulSet{}
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: name}, sts); err == nil {
		obs.StatefulSet = sts
		if err := readPods(ctx, k, sts, &obs); err != nil {
			return obs, nil, err
		}
	} else if !apierrors.IsNotFound(err) {
		return obs, nil, cli.ExplainForbidden(err, "get statefulsets")
	}
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := k.Client.List(ctx, pvcs, client.InNamespace(k.Namespace)); err != nil {
		return obs, nil, cli.ExplainForbidden(err, "list persistentvolumeclaims")
	}
	for i := range pvcs.Items {
		obs.PVCs[pvcs.Items[i].Name] = &pvcs.Items[i]
	}
	for _, secretName := range migrate.LegacyTLSSecrets(legacy.Object) {
		if err := readInto(ctx, k, secretName, &corev1.Secret{}, "get secrets", func(o client.Object) {
			obs.Secrets[secretName] = o.(*corev1.Secret).Data
		}); err != nil {
			return obs, nil, err
		}
	}
	existing := &etcdv1.EtcdCluster{}
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: name}, existing); err == nil {
		obs.Existing = existing
	} else if !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		return obs, nil, cli.ExplainForbidden(err, "get etcdclusters")
	}
	obs.Operator = runningOperators(ctx, k, legacyOperatorImage)
	return obs, legacy, nil
}

// getLegacy reads the legacy EtcdCluster, explaining why it cannot be.
func getLegacy(ctx context.Context, k *cli.Kube, name string) (*unstructured.Unstructured, error) {
	legacy := &unstructured.Unstructured{}
	legacy.SetAPIVersion("etcd.aenix.io/v1alpha1")
	legacy.SetKind("EtcdCluster")
	err := k.Client.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: name}, legacy)
	switch {
	case meta.IsNoMatchError(err):
		return nil, errors.New("the API has no etcd.aenix.io/v1alpha1 EtcdCluster kind: the legacy operator's CRD is not installed here (wrong context or namespace?)")
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("no etcd.aenix.io/v1alpha1 EtcdCluster %s in namespace %s: %w", name, k.Namespace, err)
	case err != nil:
		return nil, cli.ExplainForbidden(err, "get etcdclusters.etcd.aenix.io")
	}
	return legacy, nil
}

// readPods reads the StatefulSet's Pods and the ConfigMaps they take their environment from.
func readPods(ctx context.Context, k *cli.Kube, sts *appsv1.StatefulSet, obs *migrate.AenixObserved) error {
	pods := &corev1.PodList{}
	if err := k.Client.List(ctx, pods, client.InNamespace(k.Namespace), client.MatchingLabels(sts.Spec.Selector.MatchLabels)); err != nil {
		return cli.ExplainForbidden(err, "list pods")
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		obs.Pods[pod.Name] = pod
		for _, c := range pod.Spec.Containers {
			for _, from := range c.EnvFrom {
				ref := from.ConfigMapRef
				if ref == nil || obs.ConfigMaps[ref.Name] != nil {
					continue
				}
				if err := readInto(ctx, k, ref.Name, &corev1.ConfigMap{}, "get configmaps", func(o client.Object) {
					obs.ConfigMaps[ref.Name] = o.(*corev1.ConfigMap).Data
				}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// runningOperators finds the Deployments, in any namespace, that run an image whose name
// contains image and have replicas; or says why they could not be listed.
func runningOperators(ctx context.Context, k *cli.Kube, image string) migrate.OperatorCheck {
	list := &appsv1.DeploymentList{}
	if err := k.Client.List(ctx, list); err != nil {
		return migrate.OperatorCheck{Unknown: cli.ExplainForbidden(err, "list deployments in all namespaces").Error()}
	}
	var check migrate.OperatorCheck
	for _, d := range list.Items {
		if d.Status.Replicas == 0 && (d.Spec.Replicas != nil && *d.Spec.Replicas == 0) {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if strings.Contains(c.Image, image) {
				check.Running = append(check.Running, d.Namespace+"/"+d.Name)
				break
			}
		}
	}
	return check
}

// adoptAenix makes the plan's changes. This operator's objects come first (its EtcdMembers
// before its EtcdCluster, so that the cluster never looks empty and bootstraps), the legacy
// ones go last: the legacy EtcdCluster, then its StatefulSet, with propagationPolicy Orphan,
// so that no Pod, PVC or kept object goes with them. Once the legacy EtcdCluster is gone the
// legacy operator has nothing to act on, and a run cut short is finished by finishAenix.
func adoptAenix(ctx context.Context, o *cli.Options, k *cli.Kube, plan migrate.AenixPlan, legacy *unstructured.Unstructured) error {
	c, err := createAenixOwn(ctx, o, k, plan)
	if err != nil {
		return err
	}
	if err := orphanDelete(ctx, k, legacy); err != nil {
		return fmt.Errorf("deleting the legacy EtcdCluster: %w", err)
	}
	cli.Say(o.Out, "deleted the legacy EtcdCluster %s (orphaning its objects)\n", c.Name)
	return retireLegacy(ctx, o, k, c)
}

// retireLegacy, once the legacy EtcdCluster is gone, deletes the StatefulSet (named after the
// cluster) with propagationPolicy Orphan, makes each adopted Pod its EtcdMember's (as the
// Pods this operator creates are), takes the legacy Services it keeps (takeLegacyServices)
// and deletes the legacy objects whose names this operator uses (legacyNamesakes).
func retireLegacy(ctx context.Context, o *cli.Options, k *cli.Kube, c *etcdv1.EtcdCluster) error {
	if err := orphanDelete(ctx, k, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: k.Namespace}}); err != nil {
		return fmt.Errorf("deleting the StatefulSet: %w", err)
	}
	cli.Say(o.Out, "deleted the StatefulSet %s (orphaning its Pods)\n", c.Name)
	_, members := specs.AdoptedSubdomain(c)
	for _, name := range members {
		m := &etcdv1.EtcdMember{}
		err := k.Client.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: name}, m)
		if apierrors.IsNotFound(err) {
			continue // removed since (a scale-in after the adoption): its Pod went with it
		}
		if err != nil {
			return err
		}
		if err := setOwner(ctx, k, name, &corev1.Pod{}, m, true); err != nil {
			return err
		}
	}
	if err := takeLegacyServices(ctx, o, k, c); err != nil {
		return err
	}
	toDelete, err := legacyNamesakes(ctx, k, c)
	if err != nil {
		return err
	}
	for _, obj := range toDelete {
		if err := k.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the legacy %T %s: %w", obj, obj.GetName(), err)
		}
		cli.Say(o.Out, "deleted the legacy %s %s\n", kindOf(obj), obj.GetName())
	}
	return nil
}

// takeLegacyServices makes c the controller of the legacy headless Service (every member's
// DNS domain) and of the legacy client Service <cluster>, which this operator then keeps
// (specs.HeadlessService, specs.AdoptedClientService), when c puts every member under the
// legacy headless Service; a Service that is gone the operator makes anew. The legacy
// EtcdCluster, their controller before, is gone by now.
func takeLegacyServices(ctx context.Context, o *cli.Options, k *cli.Kube, c *etcdv1.EtcdCluster) error {
	if !specs.KeepsLegacyClientService(c) {
		return nil
	}
	for _, name := range []string{specs.MembersServiceName(c), specs.HeadlessServiceName(c.Name)} {
		err := setOwner(ctx, k, name, &corev1.Service{}, c, true)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("taking over the legacy Service %s: %w", name, err)
		}
		cli.Say(o.Out, "the legacy Service %s is this operator's now\n", name)
	}
	return nil
}

// kindOf names a legacy namesake's kind for the command's output.
func kindOf(obj client.Object) string {
	if _, ok := obj.(*corev1.Service); ok {
		return "Service"
	}
	return "PodDisruptionBudget"
}

// legacyNamesakes are the legacy PodDisruptionBudget and, for an adoption by an earlier plugin
// (members added under the Service <cluster>), the legacy client Service, both named after
// the cluster as this operator's PodDisruptionBudget and headless Service are: the objects of
// those names that c does not control (a client Service with a cluster IP). Orphaned, they no
// longer say that they were the legacy EtcdCluster's; whatever of those names c does not
// control keeps this operator from making its own.
func legacyNamesakes(ctx context.Context, k *cli.Kube, c *etcdv1.EtcdCluster) ([]client.Object, error) {
	var out []client.Object
	namesakes := []client.Object{&corev1.Service{}, &policyv1.PodDisruptionBudget{}}
	if specs.KeepsLegacyClientService(c) {
		namesakes = namesakes[1:] // the client Service stays (takeLegacyServices)
	}
	for _, obj := range namesakes {
		if err := readInto(ctx, k, c.Name, obj, "get services and poddisruptionbudgets", func(obj client.Object) {
			if svc, ok := obj.(*corev1.Service); ok && svc.Spec.ClusterIP == corev1.ClusterIPNone {
				return
			}
			if !metav1.IsControlledBy(obj, c) {
				out = append(out, obj)
			}
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// createAenixOwn creates the EtcdMembers and the EtcdCluster, and makes the cluster the owner
// of its members and of the legacy objects it keeps.
func createAenixOwn(ctx context.Context, o *cli.Options, k *cli.Kube, plan migrate.AenixPlan) (*etcdv1.EtcdCluster, error) {
	c := plan.Cluster
	for _, change := range plan.Members {
		if err := createAdoptedMember(ctx, k, change); err != nil {
			return nil, fmt.Errorf("member %s: %w", change.Member, err)
		}
		cli.Say(o.Out, "adopted member %s\n", change.Member)
	}
	if err := k.Client.Create(ctx, c); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating EtcdCluster %s (is this operator installed? kubectl apply -f config/crd/bases): %w", c.Name, err)
	}
	if err := k.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
		return nil, err
	}
	for _, change := range plan.Members {
		if err := setOwner(ctx, k, change.Member, &etcdv1.EtcdMember{}, c, true); err != nil {
			return nil, err
		}
	}
	kept := map[string]client.Object{plan.HeadlessService: &corev1.Service{}}
	for _, cm := range plan.ConfigMaps {
		kept[cm] = &corev1.ConfigMap{}
	}
	for name, obj := range kept {
		if err := setOwner(ctx, k, name, obj, c, false); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// createAdoptedMember labels the member's PVC and Pod (metadata only) and creates its
// EtcdMember with the ID etcd knows it by.
func createAdoptedMember(ctx context.Context, k *cli.Kube, change migrate.MemberChange) error {
	labels, err := labelMemberObjects(ctx, k, change)
	if err != nil {
		return err
	}
	m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: change.Member, Namespace: k.Namespace, Labels: labels}, Spec: change.Spec}
	if err := k.Client.Create(ctx, m); apierrors.IsAlreadyExists(err) {
		if err := k.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("creating EtcdMember %s (are this operator's CRDs installed? kubectl apply -f config/crd/bases): %w", m.Name, err)
	}
	return recordMemberID(ctx, k, m, change.MemberID)
}

// setOwner makes owner an owner of the named object (its controller when controller is
// true): the EtcdMembers and Pods are controlled as this operator's own are, the kept legacy
// objects go with the cluster.
func setOwner(ctx context.Context, k *cli.Kube, name string, obj client.Object, owner client.Object, controller bool) error {
	return patchNamed(ctx, k, name, obj, func() error {
		var err error
		if controller {
			err = controllerutil.SetControllerReference(owner, obj, k.Client.Scheme())
		} else {
			err = controllerutil.SetOwnerReference(owner, obj, k.Client.Scheme())
		}
		if err != nil {
			return fmt.Errorf("owner of %s: %w", name, err)
		}
		return nil
	})
}

// orphanDelete deletes obj with propagationPolicy Orphan and waits until it is gone: the
// garbage collector then has taken its owner reference off every dependent, which stays.
func orphanDelete(ctx context.Context, k *cli.Kube, obj client.Object) error {
	if err := k.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationOrphan)); client.IgnoreNotFound(err) != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := k.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
