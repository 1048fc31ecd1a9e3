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
	version string                        // the etcd version new members run
	members map[string]*etcdv1.EtcdMember // what each member's Pod was built from
	pods    map[string]*corev1.Pod        // as last created, to create a lost one again
}

func newHandMade(b *bench, ns string) *handMade {
	size := resource.MustParse("1Gi") // the API's default, which the apiserver would fill in
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: ns},
		Spec:       etcdv1.EtcdClusterSpec{Version: etcdVersion, Storage: etcdv1.StorageSpec{Size: &size}},
	}
	return &handMade{b: b, cluster: c, version: etcdVersion, members: map[string]*etcdv1.EtcdMember{}, pods: map[string]*corev1.Pod{}}
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

// createPod creates the member's Pod as specs builds it, and keeps a copy to create it again.
func (h *handMade) createPod(ctx context.Context, m *etcdv1.EtcdMember) error {
	pod := specs.Pod(h.cluster, m, specs.PodOptions{})
	h.pods[m.Name] = pod.DeepCopy()
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

// replaceWiped does by hand what the operator does for a member that lost its data: remove
// it from etcd, delete its PVC once its Pod is gone, and add it again as a learner on a new
// PVC (same name, new ID), promoted as soon as etcd allows.
func (h *handMade) replaceWiped(ctx context.Context, name string, id uint64) error {
	n := len(h.members)
	members, err := h.b.readyMembers(ctx, h.namespace(), -1)
	if err != nil {
		return err
	}
	return withEtcd(members, func(cli etcd.Client) error {
		if err := retry(ctx, h.b.opts.timeout, "removing "+name, func(ctx context.Context) error { return cli.Remove(ctx, id) }); err != nil {
			return err
		}
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace(), Name: name}}
		if err := h.b.k8s.Delete(ctx, pvc); err != nil {
			return err
		}
		if err := h.b.gone(ctx, pvc); err != nil {
			return err
		}
		var added etcd.Member
		err := retry(ctx, h.b.opts.timeout, "adding "+name+" again as a learner", func(ctx context.Context) error {
			var err error
			added, _, err = cli.AddLearner(ctx, []string{specs.PeerURL(h.cluster, name)})
			return err
		})
		if err != nil {
			return err
		}
		if err := h.createMember(ctx, name, etcdv1.InitialClusterStateExisting, h.names(n)); err != nil {
			return err
		}
		return retry(ctx, h.b.opts.timeout, "promoting "+name, func(ctx context.Context) error {
			return cli.Promote(ctx, added.ID)
		})
	})
}

// upgrade restarts the members one at a time on the new version as a person would with
// kubectl: followers first, then the leader after moving leadership away; each Pod deleted
// (gracefully, as the operator does), created again with the new image, and the next only
// once every member serves.
func (h *handMade) upgrade(ctx context.Context, version string) error {
	h.version = version
	order, err := h.followersThenLeader(ctx)
	if err != nil {
		return err
	}
	for i, name := range order {
		if i == len(order)-1 {
			if err := h.moveLeaderFrom(ctx, name); err != nil {
				return err
			}
		}
		if err := h.restartOn(ctx, name, version); err != nil {
			return err
		}
	}
	return nil
}

// followersThenLeader names the members, the leader last.
func (h *handMade) followersThenLeader(ctx context.Context) ([]string, error) {
	members, err := h.b.readyMembers(ctx, h.namespace(), len(h.members))
	if err != nil {
		return nil, err
	}
	var order []string
	var leader string
	err = withEtcd(members, func(cli etcd.Client) error {
		for _, m := range members {
			st, err := cli.Status(ctx, m.url)
			if err != nil {
				return err
			}
			if st.Leader == st.MemberID {
				leader = m.pod
				continue
			}
			order = append(order, m.pod)
		}
		return nil
	})
	if err != nil || leader == "" {
		return nil, errors.Join(err, errors.New("no leader"))
	}
	return append(order, leader), nil
}

// moveLeaderFrom hands the leadership of the member in Pod name to another voter.
func (h *handMade) moveLeaderFrom(ctx context.Context, name string) error {
	members, err := h.b.readyMembers(ctx, h.namespace(), len(h.members))
	if err != nil {
		return err
	}
	return withEtcd(members, func(cli etcd.Client) error {
		for _, m := range members {
			if m.pod == name {
				continue
			}
			st, err := cli.Status(ctx, m.url)
			if err != nil {
				return err
			}
			return retry(ctx, h.b.opts.timeout, "moving the leader to "+m.pod, func(ctx context.Context) error {
				return cli.MoveLeader(ctx, st.MemberID)
			})
		}
		return errors.New("no other member to lead")
	})
}

// restartOn deletes the member's Pod, creates it again on the new version, and waits until
// every member serves.
func (h *handMade) restartOn(ctx context.Context, name, version string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: h.namespace(), Name: name}}
	if err := h.b.k8s.Delete(ctx, pod); err != nil {
		return err
	}
	if err := h.b.gone(ctx, pod); err != nil {
		return err
	}
	m := h.members[name].DeepCopy()
	m.Spec.Version = version
	h.members[name] = m
	if err := h.createPod(ctx, m); err != nil {
		return err
	}
	return waitFor(ctx, h.b.opts.timeout, name+" serving on "+version, func(ctx context.Context) error {
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
	return h.b.k8s.Create(ctx, h.pods[name].DeepCopy())
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
