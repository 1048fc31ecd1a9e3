package specs

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// ruleFor is the ingress rule of a port, and how many rules name it.
func ruleFor(np *networkingv1.NetworkPolicy, port int32) (networkingv1.NetworkPolicyIngressRule, int) {
	var found networkingv1.NetworkPolicyIngressRule
	n := 0
	for _, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			if p.Port.IntVal == port {
				found, n = r, n+1
			}
		}
	}
	return found, n
}

func peerString(p networkingv1.NetworkPolicyPeer) string {
	sel := func(s *metav1.LabelSelector) string {
		if s == nil {
			return "-"
		}
		return fmt.Sprint(s.MatchLabels)
	}
	return "pods " + sel(p.PodSelector) + " ns " + sel(p.NamespaceSelector)
}

func TestNetworkPolicy(t *testing.T) {
	apps := &metav1.LabelSelector{MatchLabels: map[string]string{"etcd-client": "db"}}
	teams := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "orders"}}
	members := "pods map[app.kubernetes.io/instance:db app.kubernetes.io/managed-by:etcd-operator app.kubernetes.io/name:etcd etcd-operator.cozystack.io/cluster:db] ns -"
	operator := "pods map[app.kubernetes.io/name:etcd-operator] ns map[kubernetes.io/metadata.name:etcd-operator-system]"
	agents := "pods map[app.kubernetes.io/managed-by:etcd-operator etcd-operator.cozystack.io/snapshot-of:db] ns -"
	for _, tc := range []struct {
		name        string
		spec        etcdv1.NetworkPolicySpec
		auth        authState
		wantClients []string
	}{
		{"no client selector: the operator only", etcdv1.NetworkPolicySpec{Enabled: true}, noAuth, []string{operator, agents}},
		{"clients of the namespace", etcdv1.NetworkPolicySpec{Enabled: true, ClientSelector: apps}, noAuth,
			[]string{operator, agents, "pods map[etcd-client:db] ns -"}},
		{"clients of chosen namespaces", etcdv1.NetworkPolicySpec{Enabled: true, ClientSelector: apps, ClientNamespaceSelector: teams}, noAuth,
			[]string{operator, agents, "pods map[etcd-client:db] ns map[team:orders]"}},
		{"auth pending, no spec.networkPolicy: the operator alone", etcdv1.NetworkPolicySpec{}, authPending, []string{operator}},
		{"auth pending: the operator alone, not yet the chosen clients", etcdv1.NetworkPolicySpec{Enabled: true, ClientSelector: apps}, authPending,
			[]string{operator}},
		{"auth on: the chosen clients again", etcdv1.NetworkPolicySpec{Enabled: true, ClientSelector: apps}, authOn,
			[]string{operator, agents, "pods map[etcd-client:db] ns -"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(func(c *etcdv1.EtcdCluster) { c.Spec.NetworkPolicy = &tc.spec }, tc.auth.edit)
			np := NetworkPolicy(c, OperatorPeer("etcd-operator-system"))
			if np.Name != "db" || np.Namespace != "prod" || fmt.Sprint(np.Spec.PodSelector.MatchLabels) != fmt.Sprint(ClusterLabels("db")) {
				t.Fatalf("policy %s/%s over %v", np.Namespace, np.Name, np.Spec.PodSelector.MatchLabels)
			}
			if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Ingress) != 3 {
				t.Fatalf("policy types %v with %d rules", np.Spec.PolicyTypes, len(np.Spec.Ingress))
			}
			peer, n := ruleFor(np, PeerPort)
			if n != 1 || len(peer.From) != 1 || peerString(peer.From[0]) != members {
				t.Fatalf("2380 from %v (%d rules), want the cluster's members only", peer.From, n)
			}
			client, n := ruleFor(np, ClientPort)
			var got []string
			for _, p := range client.From {
				got = append(got, peerString(p))
			}
			if n != 1 || !slices.Equal(got, tc.wantClients) {
				t.Fatalf("2379 from %q (%d rules), want %q", got, n, tc.wantClients)
			}
			metrics, n := ruleFor(np, MetricsPort)
			if n != 1 || len(metrics.From) != 0 {
				t.Fatalf("2381 from %v (%d rules), want everyone", metrics.From, n)
			}
		})
	}
}

// authState is where a cluster is with spec.auth.
type authState int

const (
	noAuth      authState = iota // no spec.auth
	authPending                  // spec.auth.enabled, status.authEnabled not yet
	authOn                       // spec.auth.enabled and status.authEnabled
)

func (a authState) edit(c *etcdv1.EtcdCluster) {
	if a == noAuth {
		return
	}
	c.Spec.Auth = &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "root"}}
	c.Status.AuthEnabled = a == authOn
}

// A cluster has a NetworkPolicy when spec.networkPolicy asks for one, and while its
// authentication is pending whatever the spec says: members serve before auth is on.
func TestNetworkPolicyWanted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enabled bool
		auth    authState
		want    bool
	}{
		{"neither", false, noAuth, false},
		{"spec.networkPolicy", true, noAuth, true},
		{"auth pending", false, authPending, true},
		{"auth pending and spec.networkPolicy", true, authPending, true},
		{"auth on, no spec.networkPolicy: the temporary policy goes", false, authOn, false},
		{"auth on and spec.networkPolicy", true, authOn, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(func(c *etcdv1.EtcdCluster) { c.Spec.NetworkPolicy = &etcdv1.NetworkPolicySpec{Enabled: tc.enabled} }, tc.auth.edit)
			if got := NetworkPolicyWanted(c); got != tc.want {
				t.Fatalf("NetworkPolicyWanted = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOperatorPeerWithoutAKnownNamespaceMatchesAnyNamespace(t *testing.T) {
	p := OperatorPeer("")
	if p.NamespaceSelector == nil || len(p.NamespaceSelector.MatchLabels) != 0 || p.PodSelector.MatchLabels[etcdv1.LabelName] != ManagerName {
		t.Fatalf("%s", peerString(p))
	}
}

// Peers are pinned to the cluster's own headless Service name when cert-manager issues the
// peer certificate, and that certificate carries the name; a user's own peer Secret is not
// pinned (its names are unknown).
func TestPeerPinMatchesThePeerCertificate(t *testing.T) {
	issued := cluster(func(c *etcdv1.EtcdCluster) {
		c.Spec.TLS = &etcdv1.EtcdClusterTLS{Peer: &etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: etcdv1.IssuerReference{Name: "ca"}}}}
	})
	args := EtcdArgs(issued, member(issued, "db-1"))
	if !slices.Contains(args, "--peer-cert-allowed-hostname=db.prod.svc") {
		t.Fatalf("args %v lack the peer pin", args)
	}
	names, _ := PeerCertificate(issued, DefaultClusterDomain).Object["spec"].(map[string]any)["dnsNames"].([]any)
	if !slices.Contains(names, any("db.prod.svc")) {
		t.Fatalf("the peer certificate's names %v lack the pinned db.prod.svc: members would refuse each other", names)
	}
	own := cluster(func(c *etcdv1.EtcdCluster) {
		c.Spec.TLS = &etcdv1.EtcdClusterTLS{Peer: &etcdv1.PeerTLS{SecretRef: &corev1.LocalObjectReference{Name: "peer"}}}
	})
	for _, a := range EtcdArgs(own, member(own, "db-1")) {
		if strings.HasPrefix(a, "--peer-cert-allowed-") {
			t.Fatalf("a user's peer Secret is pinned: %s", a)
		}
	}
}
