package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	version string                        // the etcd version new members run
	members map[string]*etcdv1.EtcdMember // what each member's Pod is built from
}

func newHandMade(b *bench, ns string) *handMade {
	size := resource.MustParse("1Gi") // the API's default, which the apiserver would fill in
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns},
		Spec:       etcdv1.EtcdClusterSpec{Version: etcdVersion, Storage: etcdv1.StorageSpec{Size: &size}},
	}
	return &handMade{b: b, cluster: c, version: etcdVersion, members: map[string]*etcdv1.EtcdMember{}}
}

func (h *handMade) namespace() string { return h.cluster.Namespace }

func (h *handMade) start(ctx context.Context, n int, version string) error {
	h.version = version
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
			Version:     h.version,
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
	h.members[name] = m
	return h.createPod(ctx, m)
}

// createPod creates the member's Pod as specs builds it.
func (h *handMade) createPod(ctx context.Context, m *etcdv1.EtcdMember) error {
	return h.b.k8s.Create(ctx, specs.Pod(h.cluster, m, specs.PodOptions{}))
}

// grow does by hand what the operator does: add a learner, start it, promote it as soon as
// etcd allows.
func (h *handMade) grow(ctx context.Context, n int) error {
	members, err := h.b.readyMembers(ctx, h.namespace(), n-1)
	if err != nil {
		return err
	}
	names := h.names(n)
	return withEtcd(members, func(cli etcd.Client) error {
		return h.join(ctx, cli, names[n-1], names)
	})
}

// join adds the member as a learner, creates its PVC and Pod knowing the given members, and
// promotes it as soon as etcd allows. Each call is retried at once, which no controller does
// faster; a retry finds the work of an attempt whose answer was lost done.
func (h *handMade) join(ctx context.Context, cli etcd.Client, name string, names []string) error {
	peerURL := specs.PeerURL(h.cluster, name)
	var id uint64
	err := retry(ctx, h.b.opts.timeout, "adding "+name+" as a learner", func(ctx context.Context) error {
		added, _, err := cli.AddLearner(ctx, []string{peerURL})
		if errors.Is(err, etcd.ErrMemberExists) {
			added, err = memberWithPeer(ctx, cli, peerURL)
		}
		id = added.ID
		return err
	})
	if err != nil {
		return err
	}
	if err := h.createMember(ctx, name, etcdv1.InitialClusterStateExisting, names); err != nil {
		return err
	}
	return retry(ctx, h.b.opts.timeout, "promoting "+name, func(ctx context.Context) error {
		if err := cli.Promote(ctx, id, ""); !errors.Is(err, etcd.ErrMemberNotLearner) {
			return err
		}
		return nil
	})
}

// shrink does by hand what the operator does to remove a member, as safely: the newest
// member goes (leadership handed to another first when it leads); its Pod is deleted
// gracefully and gone before etcd removes it, so that its clients have moved to the others
// before the removal ends it; then its PVC goes.
func (h *handMade) shrink(ctx context.Context, n int) error {
	sts, err := h.b.statuses(ctx, h.namespace(), n+1)
	if err != nil {
		return err
	}
	name := specs.MemberName(h.cluster.Name, n)
	i := slices.IndexFunc(sts, func(st memberStatus) bool { return st.pod == name })
	if i < 0 {
		return fmt.Errorf("member %s is not among the ready ones", name)
	}
	if leaving := sts[i]; leaving.Leader == leaving.MemberID {
		if err := h.moveLeader(ctx, sts[(i+1)%len(sts)].MemberID); err != nil {
			return err
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace(), Name: name}}
	if err := h.b.k8s.Delete(ctx, pod); err != nil {
		return err
	}
	if err := h.b.gone(ctx, pod); err != nil {
		return err
	}
	if err := h.remove(ctx, name, sts[i].MemberID); err != nil {
		return err
	}
	delete(h.members, name)
	return h.b.k8s.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace(), Name: name}})
}

// remove removes the member from etcd through the members still ready; a retry after an
// answer that was lost finds it removed.
func (h *handMade) remove(ctx context.Context, name string, id uint64) error {
	members, err := h.b.someReadyMembers(ctx, h.namespace())
	if err != nil {
		return err
	}
	return withEtcd(members, func(cli etcd.Client) error {
		return retry(ctx, h.b.opts.timeout, "removing "+name, func(ctx context.Context) error {
			if err := cli.Remove(ctx, id); !errors.Is(err, etcd.ErrMemberNotFound) {
				return err
			}
			return nil
		})
	})
}

// memberWithPeer is the member etcd lists with peerURL.
func memberWithPeer(ctx context.Context, cli etcd.Client, peerURL string) (etcd.Member, error) {
	_, list, err := cli.MemberList(ctx)
	if err != nil {
		return etcd.Member{}, err
	}
	for _, m := range list {
		if slices.Contains(m.PeerURLs, peerURL) {
			return m, nil
		}
	}
	return etcd.Member{}, fmt.Errorf("no member with peer URL %s", peerURL)
}

// replaceWiped does by hand what the operator does for a member that lost its data: remove
// it from etcd, delete its PVC once its Pod is gone, and add it again as a learner on a new
// PVC (same name, new ID), promoted as soon as etcd allows.
func (h *handMade) replaceWiped(ctx context.Context, name string, id uint64) error {
	if err := h.remove(ctx, name, id); err != nil {
		return err
	}
	members, err := h.b.someReadyMembers(ctx, h.namespace())
	if err != nil {
		return err
	}
	return withEtcd(members, func(cli etcd.Client) error {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace(), Name: name}}
		if err := h.b.k8s.Delete(ctx, pvc); err != nil {
			return err
		}
		if err := h.b.gone(ctx, pvc); err != nil {
			return err
		}
		return h.join(ctx, cli, name, h.names(len(h.members)))
	})
}

// upgrade restarts the members one at a time on the new version as a person would with
// kubectl: followers first, then the leader after moving leadership to a follower; each Pod
// deleted (gracefully, as the operator does), created again with the new image, and the next
// only once every member serves.
func (h *handMade) upgrade(ctx context.Context, version string) error {
	h.version = version
	sts, err := h.b.statuses(ctx, h.namespace(), len(h.members))
	if err != nil {
		return err
	}
	i := slices.IndexFunc(sts, func(st memberStatus) bool { return st.Leader == st.MemberID })
	switch {
	case i < 0:
		return errors.New("no leader")
	case len(sts) < 2:
		return errors.New("no other member to lead")
	}
	leader := sts[i]
	followers := slices.Delete(sts, i, i+1)
	for _, f := range followers {
		if err := h.restart(ctx, f.pod); err != nil {
			return err
		}
	}
	if err := h.moveLeader(ctx, followers[0].MemberID); err != nil {
		return err
	}
	return h.restart(ctx, leader.pod)
}

// moveLeader hands the leadership to member to.
func (h *handMade) moveLeader(ctx context.Context, to uint64) error {
	members, err := h.b.readyMembers(ctx, h.namespace(), len(h.members))
	if err != nil {
		return err
	}
	return withEtcd(members, func(cli etcd.Client) error {
		return retry(ctx, h.b.opts.timeout, fmt.Sprintf("moving the leader to %x", to), func(ctx context.Context) error {
			return cli.MoveLeader(ctx, to)
		})
	})
}

// restart deletes the member's Pod, creates it again on the version new members run, and
// waits until every member serves.
func (h *handMade) restart(ctx context.Context, name string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace(), Name: name}}
	if err := h.b.k8s.Delete(ctx, pod); err != nil {
		return err
	}
	if err := h.b.gone(ctx, pod); err != nil {
		return err
	}
	m := h.members[name].DeepCopy()
	m.Spec.Version = h.version
	h.members[name] = m
	if err := h.createPod(ctx, m); err != nil {
		return err
	}
	return waitFor(ctx, h.b.opts.timeout, name+" serving on "+h.version, func(ctx context.Context) error {
		return h.b.serving(ctx, h.namespace(), len(h.members))
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
	if err := h.b.gone(ctx, pod); err != nil {
		return err
	}
	return h.createPod(ctx, h.members[name])
}

// gone waits until obj no longer exists.
func (b *bench) gone(ctx context.Context, obj client.Object) error {
	return waitFor(ctx, b.opts.timeout, obj.GetName()+" gone", func(ctx context.Context) error {
		switch err := b.k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return errors.New("still there")
	})
}

func (h *handMade) settled(ctx context.Context, n int) error {
	return h.b.serving(ctx, h.namespace(), n)
}
