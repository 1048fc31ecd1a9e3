package main

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// handMade is the floor: the very Pods, PVCs and headless Service the operator makes for the
// same members (built by internal/specs: same image, flags, probes and volumes), created by
// hand with a static --initial-cluster, members added by hand through etcd's learner API.
// No controller owns them. What it costs is what Kubernetes and etcd cost, without the
// operator.
type handMade struct {
	b *bench
	// cluster exists only here: it gives specs the names, URLs and defaults.
	cluster *etcdv1.EtcdCluster
	pods    map[string]*corev1.Pod // as first created, to create a lost one again
}

func newHandMade(b *bench, ns string) *handMade {
	size := resource.MustParse("1Gi") // the API's default, which the apiserver would fill in
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns},
		Spec:       etcdv1.EtcdClusterSpec{Version: etcdVersion, Storage: etcdv1.StorageSpec{Size: &size}},
	}
	return &handMade{b: b, cluster: c, pods: map[string]*corev1.Pod{}}
}

func (h *handMade) namespace() string { return h.cluster.Namespace }

func (h *handMade) start(ctx context.Context, n int) error {
	if err := h.b.k8s.Create(ctx, specs.HeadlessService(h.cluster)); err != nil {
		return err
	}
	names := h.names(n)
	for _, name := range names {
		if err := h.createMember(ctx, name, etcdv1.InitialClusterStateNew, names); err != nil {
			return err
		}
	}
	return nil
}

func (h *handMade) names(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = specs.MemberName(h.cluster.Name, i)
	}
	return names
}

// createMember creates the PVC and Pod of one member that knows the given members.
func (h *handMade) createMember(ctx context.Context, name string, state etcdv1.InitialClusterState, names []string) error {
	m := &etcdv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.namespace()},
		Spec: etcdv1.EtcdMemberSpec{
			ClusterName: h.cluster.Name,
			Version:     etcdVersion,
			Storage:     h.cluster.Spec.Storage,
			Bootstrap: etcdv1.MemberBootstrap{
				InitialCluster:      specs.InitialCluster(h.cluster, names),
				InitialClusterState: state,
				ClusterToken:        h.namespace(),
			},
		},
	}
	if err := h.b.k8s.Create(ctx, specs.PVC(h.cluster, m)); err != nil {
		return err
	}
	pod := specs.Pod(h.cluster, m, specs.PodOptions{})
	h.pods[name] = pod.DeepCopy()
	return h.b.k8s.Create(ctx, pod)
}

// grow does by hand what the operator does: add a learner, start it, promote it as soon as
// etcd allows. Each call is retried at once, which no controller does faster.
func (h *handMade) grow(ctx context.Context, n int) error {
	members, err := h.b.readyMembers(ctx, h.namespace(), n-1)
	if err != nil {
		return err
	}
	names := h.names(n)
	newcomer := names[n-1]
	return withEtcd(members, func(cli etcd.Client) error {
		var added etcd.Member
		err := retry(ctx, h.b.opts.timeout, "adding "+newcomer+" as a learner", func(ctx context.Context) error {
			var err error
			added, _, err = cli.AddLearner(ctx, []string{specs.PeerURL(h.cluster, newcomer)})
			return err
		})
		if err != nil {
			return err
		}
		if err := h.createMember(ctx, newcomer, etcdv1.InitialClusterStateExisting, names); err != nil {
			return err
		}
		return retry(ctx, h.b.opts.timeout, "promoting "+newcomer, func(ctx context.Context) error {
			return cli.Promote(ctx, added.ID)
		})
	})
}

// retry polls a membership change. Each attempt has its own deadline: etcd drops a change
// proposed while another is applied, and the call would otherwise wait forever.
func retry(ctx context.Context, timeout time.Duration, what string, change func(context.Context) error) error {
	return waitFor(ctx, timeout, what, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return change(ctx)
	})
}

// losePod deletes the Pod and, once it is gone, creates it again on the same PVC: the member
// comes back with its data and ID.
func (h *handMade) losePod(ctx context.Context, name string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace(), Name: name}}
	if err := h.b.k8s.Delete(ctx, pod, lost); err != nil {
		return err
	}
	err := waitFor(ctx, h.b.opts.timeout, "Pod "+name+" gone", func(ctx context.Context) error {
		switch err := h.b.k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return errors.New("still there")
	})
	if err != nil {
		return err
	}
	return h.b.k8s.Create(ctx, h.pods[name].DeepCopy())
}

func (h *handMade) settled(ctx context.Context, n int) error {
	return h.b.serving(ctx, h.namespace(), n)
}
