package migratecmd

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdfake"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/migrate"
)

const rootPassword = "r00t-Pa55"

// authEtcd is a one-member fake etcd with root (password rootPassword) and, if on,
// authentication enabled.
func authEtcd(t *testing.T, on bool) *etcdfake.Cluster {
	t.Helper()
	f := etcdfake.New()
	f.SeedMember("cz-a", "http://cz-a.cz.ns.svc:2380", "http://cz-a.cz.ns.svc:2379")
	f.SeedUser(etcd.RootUser, rootPassword, etcd.RootRole)
	if on {
		if err := f.AuthEnable(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func login(t *testing.T, f *etcdfake.Cluster, password string) etcd.Client {
	t.Helper()
	cli, err := f.Login(etcd.RootUser, password)
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// The command asks etcd whether auth is on and whether the client this operator will use is
// root there (a client without root's credentials is not).
func TestObserveAuth(t *testing.T) {
	off := authEtcd(t, false)
	if got := observeAuth(context.Background(), off); got != (migrate.EtcdAuth{Known: true}) {
		t.Errorf("auth off: %+v", got)
	}
	on := authEtcd(t, true)
	if got := observeAuth(context.Background(), login(t, on, rootPassword)); got != (migrate.EtcdAuth{Known: true, Enabled: true}) {
		t.Errorf("auth on, as root: %+v", got)
	}
	if got := observeAuth(context.Background(), on); !got.Known || !got.Enabled || got.RootErr == "" {
		t.Errorf("auth on, no credentials: %+v, want RootErr", got)
	}
}

// cozystackSession is a session of cluster cz with spec.auth naming Secret cz-root, which
// holds password (none when password is "").
func cozystackSession(t *testing.T, e etcd.Client, password string) *cli.Session {
	t.Helper()
	scheme, err := cli.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	if password != "" {
		b = b.WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cz-root", Namespace: "ns"},
			Data: map[string][]byte{"username": []byte("root"), "password": []byte(password)}})
	}
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "cz", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{
		Auth: &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "cz-root"}}}}
	return &cli.Session{Kube: &cli.Kube{Client: b.Build(), Namespace: "ns"}, Cluster: c, Etcd: e}
}

// The password of spec.auth's Secret is checked against etcd; a missing Secret or a password
// etcd refuses is what the plan refuses with, and the password itself is said nowhere.
func TestObserveCozystackAuth(t *testing.T) {
	on := authEtcd(t, true)
	for name, tc := range map[string]struct {
		secret string
		want   string
	}{
		"accepted":  {secret: rootPassword},
		"refused":   {secret: "wrong-Pa55", want: "etcd refuses root's password from Secret cz-root (spec.auth.rootCredentialsSecretRef)"},
		"no secret": {want: "Secret cz-root, named by spec.auth.rootCredentialsSecretRef, does not exist"},
	} {
		t.Run(name, func(t *testing.T) {
			a, err := observeCozystackAuth(context.Background(), cozystackSession(t, login(t, on, rootPassword), tc.secret))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(a.CredentialsProblem, tc.want) || (tc.want == "") != (a.CredentialsProblem == "") {
				t.Errorf("credentials problem %q, want %q", a.CredentialsProblem, tc.want)
			}
			if strings.Contains(a.CredentialsProblem, rootPassword) || strings.Contains(a.CredentialsProblem, "wrong-Pa55") {
				t.Errorf("a password is in the message: %q", a.CredentialsProblem)
			}
		})
	}
}
