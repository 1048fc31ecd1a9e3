package cluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func TestWaitForAdoptionNamesPendingMembers(t *testing.T) {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "cz", Namespace: "ns"}}
	ours := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "cz-1"}, Spec: etcdv1.EtcdMemberSpec{
		Bootstrap: etcdv1.MemberBootstrap{InitialClusterState: etcdv1.InitialClusterStateExisting}}}
	theirs := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "cz-x7k2p"}}
	if err := waitForAdoption(c, &clusterView{members: []*etcdv1.EtcdMember{ours}}); err != nil {
		t.Errorf("adopted members only: %v", err)
	}
	err := waitForAdoption(c, &clusterView{members: []*etcdv1.EtcdMember{ours, theirs}})
	var w kit.Waiting
	if !errors.As(err, &w) || w.Reason != etcdv1.ReasonAdoptionPending || !strings.Contains(w.Message, "members cz-x7k2p were created by another operator") ||
		!strings.Contains(w.Message, "kubectl etcd migrate cozystack cz -n ns") {
		t.Errorf("got %v", err)
	}
}

func TestPVCMemberPrefersTheMemberLabel(t *testing.T) {
	adopted := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-cz-x", Labels: map[string]string{etcdv1.LabelMember: "cz-x"}}}
	native := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "cz-1"}}
	if pvcMember(adopted) != "cz-x" || pvcMember(native) != "cz-1" {
		t.Errorf("got %q, %q", pvcMember(adopted), pvcMember(native))
	}
}

// A cluster whose members another operator created is left alone until they are adopted:
// not paused (replicas 0), not scaled (replicas 5), no etcd membership change, and
// Progressing says why.
func TestClusterWaitsForAdoption(t *testing.T) {
	for _, replicas := range []int32{0, 3, 5} {
		h := newHarness(t)
		c := h.clusterObj()
		c.Status.ClusterID = "c1"
		if err := h.api.Status().Update(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		h.setReplicas(replicas)
		for _, name := range []string{"db-b5t8w", "db-q9d4m", "db-x7k2p"} {
			m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: specs.MemberLabels("db", name)},
				Spec: etcdv1.EtcdMemberSpec{ClusterName: "db", Version: "3.6.16"}}
			if err := h.api.Create(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			h.etcd.SeedMember(name, specs.PeerURL(c, name), specs.ClientURL(c, name))
		}
		h.etcd.ResetCalls()
		for range 3 {
			h.reconcileNamed("db")
		}
		if calls := h.etcd.Calls(); slices.ContainsFunc(calls, func(call string) bool {
			return strings.HasPrefix(call, "AddLearner") || strings.HasPrefix(call, "Remove") || strings.HasPrefix(call, "Promote")
		}) {
			t.Errorf("replicas %d: membership changed before adoption: %v", replicas, calls)
		}
		members := h.members()
		if len(members) != 3 || slices.ContainsFunc(members, func(m *etcdv1.EtcdMember) bool { return m.Spec.Dormant }) {
			t.Errorf("replicas %d: members changed before adoption: %d, %+v", replicas, len(members), members)
		}
		if cond := h.conditionOf("db", etcdv1.ConditionProgressing); cond.Reason != etcdv1.ReasonAdoptionPending {
			t.Errorf("replicas %d: Progressing %+v", replicas, cond)
		}
	}
}

// The Pods adopted members brought along (no template hash: another operator built them) are
// not restarted for being different from this operator's; a native member's Pod without the
// hash is.
func TestAdoptedPodsAreNotRestartedForTheirShape(t *testing.T) {
	for _, adopted := range []bool{true, false} {
		h := runningHarness(t)
		for _, m := range h.members() {
			if adopted {
				m.Spec.Adopted = &etcdv1.MemberAdoption{From: etcdv1.AdoptedFromCozystack, PVCName: "data-" + m.Name, DataDir: "/var/lib/etcd"}
				if err := h.api.Update(context.Background(), m); err != nil {
					t.Fatal(err)
				}
			}
		}
		h.startPods()
		for _, name := range h.podNames() {
			pod := &corev1.Pod{}
			if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, pod); err != nil {
				t.Fatal(err)
			}
			delete(pod.Annotations, etcdv1.AnnotationPodTemplateHash)
			if err := h.api.Update(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
		}
		h.reconcile()
		if got := h.podNames(); (len(got) == 3) != adopted {
			t.Errorf("adopted %t: Pods after a reconcile %v", adopted, got)
		}
	}
}

// A cluster another operator runs with auth to come (spec.auth, status.authEnabled not yet
// true) is left alone until its members are adopted: this operator does not turn auth on in
// etcd behind that operator's back. kubectl etcd migrate refuses such a cluster until etcd
// has auth on.
func TestAuthWaitsForAdoption(t *testing.T) {
	h := authHarness(t, map[string][]byte{"password": []byte(firstPassword)})
	h.r.OperatorNamespace = "ops"
	c := h.clusterObj()
	for _, name := range []string{"db-b5t8w", "db-q9d4m", "db-x7k2p"} {
		m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: specs.MemberLabels("db", name)},
			Spec: etcdv1.EtcdMemberSpec{ClusterName: "db", Version: "3.6.16"}}
		if err := h.api.Create(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		h.etcd.SeedMember(name, specs.PeerURL(c, name), specs.ClientURL(c, name))
	}
	for range 3 {
		h.reconcileNamed("db")
	}
	if h.etcd.AuthEnabled() || slices.ContainsFunc(h.etcd.Calls(), func(call string) bool { return strings.HasPrefix(call, "User") }) {
		t.Errorf("auth changed in etcd before adoption: %v", h.etcd.Calls())
	}
	if cond := h.conditionOf("db", etcdv1.ConditionProgressing); cond.Reason != etcdv1.ReasonAdoptionPending {
		t.Errorf("Progressing %+v", cond)
	}
}

// A cluster whose etcd already has auth on with root's password from spec.auth's Secret (as
// Cozystack's operator leaves it) is taken over as it is: the operator logs in with that
// password and records it as applied; it creates no user, changes no password and enables
// nothing.
func TestAuthAlreadyOnIsTakenOverAsItIs(t *testing.T) {
	h := authHarness(t, map[string][]byte{"username": []byte("root"), "password": []byte(firstPassword)})
	h.reconcile() // the members
	c := h.clusterObj()
	for _, m := range h.members() {
		h.etcd.SeedMember(m.Name, specs.PeerURL(c, m.Name), specs.ClientURL(c, m.Name))
	}
	h.etcd.SeedUser(etcd.RootUser, firstPassword, etcd.RootRole)
	if err := h.etcd.AuthEnable(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.etcd.ResetCalls()
	h.reconcile()
	h.reconcile()
	if calls := h.etcd.Calls(); slices.ContainsFunc(calls, func(call string) bool {
		return strings.HasPrefix(call, "UserAdd") || strings.HasPrefix(call, "UserChangePassword") || strings.HasPrefix(call, "AuthEnable")
	}) {
		t.Errorf("auth changed in etcd: %v", calls)
	}
	if got := h.etcd.Password(etcd.RootUser); got != firstPassword || !h.etcd.AuthEnabled() {
		t.Errorf("root's password changed or auth went off (enabled %v)", h.etcd.AuthEnabled())
	}
	applied := &corev1.Secret{}
	if err := h.api.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: specs.RootAppliedSecretName("db")}, applied); err != nil || string(applied.Data["password"]) != firstPassword {
		t.Errorf("applied password not recorded: %v", err)
	}
	if !h.clusterObj().Status.AuthEnabled {
		t.Errorf("status.authEnabled not set")
	}
}
