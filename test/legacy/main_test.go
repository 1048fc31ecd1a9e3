// Package legacy proves `kubectl etcd migrate aenix` and `kubectl etcd migrate cozystack`
// against the real legacy operators, built from their public source: each creates and runs a
// three-member cluster with TLS and auth on the local cluster, is stopped, ours is started,
// and the migration takes the cluster over under a writer (no failed write, every key kept),
// which then scales 3 -> 5 -> 3 under ours.
//
// Only hack/legacy-migrations.sh (make legacy-migrations) runs this package: it builds the
// legacy operators, maps their images into the local cluster, and provides what TestMain
// requires. It is not part of make test or test/e2e (CI cannot fetch the legacy source). The
// tests switch the one operator running between them, so they run one at a time.
package legacy

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/clusterenv"
	"github.com/quorumkeeper/etcd-operator/test/etcdload"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

var (
	k8s      client.Client
	resolver *net.Resolver
	// switchCmd makes one operator the one running: "<switch command> ours|aenix|cozystack".
	switchCmd []string
	plugin    string // bin/kubectl-etcd
)

// required is what hack/legacy-migrations.sh provides; without it nothing here can run.
var required = []string{"KUBECONFIG", "LEGACY_SWITCH", "KUBECTL_ETCD"}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	if err := setUp(); err != nil {
		fmt.Fprintln(os.Stderr, "legacy:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func setUp() error {
	for _, name := range required {
		if os.Getenv(name) == "" {
			return fmt.Errorf("%s is not set: run through 'make legacy-migrations' (hack/legacy-migrations.sh), which builds the legacy operators and starts the local cluster with them", name)
		}
	}
	switchCmd, plugin = strings.Fields(os.Getenv("LEGACY_SWITCH")), os.Getenv("KUBECTL_ETCD")
	if _, err := os.Stat(plugin); err != nil {
		return fmt.Errorf("KUBECTL_ETCD: %w", err)
	}
	var err error
	if k8s, _, err = clusterenv.Client(os.Getenv("KUBECONFIG")); err != nil {
		return err
	}
	resolver = clusterenv.Resolver(os.Getenv("E2E_CLUSTER_DNS"))
	return nil
}

// switchTo makes side (ours, aenix or cozystack) the one operator running, through
// hack/legacy-migrations.sh switch.
func switchTo(t *testing.T, side string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := append(append([]string(nil), switchCmd[1:]...), side)
	out, err := exec.CommandContext(ctx, switchCmd[0], args...).CombinedOutput()
	if err != nil {
		t.Fatalf("switching to %s: %v\n%s", side, err, out)
	}
	t.Logf("%s is the operator running", side)
}

// runPlugin runs `kubectl etcd ARGS` in namespace ns.
func runPlugin(t *testing.T, ns string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, plugin, append([]string{"--kubeconfig", os.Getenv("KUBECONFIG"), "-n", ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl etcd %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// namespace is a new namespace for one test, deleted at its end, and gone before the next
// test switches operators: a test that passed ends with ours running, whose finalizers its
// objects carry, and the next operator to run (Cozystack's serves the same kinds) must find
// nothing of it.
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k8s.Delete(context.Background(), ns); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
			return
		}
		deadline := time.Now().Add(namespaceGone)
		for {
			err := k8s.Get(context.Background(), client.ObjectKeyFromObject(ns), &corev1.Namespace{})
			if apierrors.IsNotFound(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("namespace %s is not gone %s after its deletion (%v): an operator that is stopped holds its finalizers; the next test's operator may find its objects", ns.Name, namespaceGone, err)
				return
			}
			time.Sleep(time.Second)
		}
	})
	return ns.Name
}

// namespaceGone is how long a test's namespace may take to go at its end.
const namespaceGone = 5 * time.Minute

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func tlsSecret(ns, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS, Data: data}
}

// waitSettled waits until ours has settled the cluster at n healthy voters, nothing in motion.
func waitSettled(t *testing.T, ns, name string, n int32, timeout time.Duration) *etcdv1.EtcdCluster {
	t.Helper()
	c := &etcdv1.EtcdCluster{}
	etcdload.Eventually(t, timeout, fmt.Sprintf("%s/%s settled at %d members", ns, name, n), func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
			return err
		}
		return robustness.Settled(c, n)
	})
	return c
}

// migrate runs `kubectl etcd migrate KIND CLUSTER`, a dry run first (its output must have
// every line of want), then with --apply and a safety snapshot, and waits until ours has
// settled the cluster at its three members. The writer w runs all along: no write may fail
// (it started once the legacy operator had auth on, so every failure is the migration's).
func migrate(t *testing.T, w *etcdload.Writer, ns, kind, cluster string, want ...string) *etcdv1.EtcdCluster {
	t.Helper()
	out := runPlugin(t, ns, "migrate", kind, cluster)
	for _, line := range append(want, "dry run: nothing was changed") {
		if !strings.Contains(out, line) {
			t.Errorf("the dry run's output lacks %q:\n%s", line, out)
		}
	}
	snap := t.TempDir() + "/before-migration.db"
	out = runPlugin(t, ns, "migrate", kind, cluster, "--apply", "--snapshot-file", snap)
	t.Logf("kubectl etcd migrate %s %s --apply:\n%s", kind, cluster, out)
	if st, err := os.Stat(snap); err != nil || st.Size() == 0 {
		t.Errorf("no safety snapshot at %s (%v)", snap, err)
	}
	c := waitSettled(t, ns, cluster, 3, 5*time.Minute)
	w.NoFailedWrite(t, "the migration")
	return c
}

// checkSameMembers: ours runs the members etcd had before the migration, by etcd ID.
func checkSameMembers(t *testing.T, c *etcdv1.EtcdCluster, before map[string]string) {
	t.Helper()
	now := map[string]string{}
	for _, m := range c.Status.Members {
		now[m.Name] = m.ID
	}
	for name, id := range before {
		if now[name] != id {
			t.Errorf("member %s had etcd ID %s before the migration, %q now (%v)", name, id, now[name], now)
		}
	}
}

// scaleOutAndIn scales the migrated cluster 3 -> 5 -> 3 under ours, the writer running, as
// test/e2e's takeovers do: no write fails through the migration and the scale-out (learners
// added and promoted stop no member); the two voters removed are each stopped first, so only
// a leadership handed over (a LeaderMoved event) may fail a put; every acknowledged write
// reads back.
func scaleOutAndIn(t *testing.T, w *etcdload.Writer, ns, cluster string) {
	t.Helper()
	setReplicas(t, ns, cluster, 5)
	waitSettled(t, ns, cluster, 5, 8*time.Minute)
	w.NoFailedWrite(t, "the migration and the scale-out to 5")
	setReplicas(t, ns, cluster, 3)
	waitSettled(t, ns, cluster, 3, 8*time.Minute)
	w.StopAndVerify(t, 100)
	moves, err := clusterenv.EventCount(context.Background(), k8s, ns, etcdv1.ReasonLeaderMoved)
	if err != nil {
		t.Fatal(err)
	}
	w.OnlyLeaderMoveFailures(t, moves, "the scale-in from 5 to 3")
}

// setReplicas sets the cluster's spec.replicas.
func setReplicas(t *testing.T, ns, cluster string, n int32) {
	t.Helper()
	c := &etcdv1.EtcdCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cluster}, c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Replicas = &n
	if err := k8s.Patch(context.Background(), c, patch); err != nil {
		t.Fatal(err)
	}
}

// memberIDs is etcd's own member list through cli, by name.
func memberIDs(t *testing.T, cli *clientv3.Client) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, m := range resp.Members {
		ids[m.Name] = fmt.Sprintf("%x", m.ID)
	}
	return ids
}

// checkAuthOn: etcd has authentication on.
func checkAuthOn(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := authOn(ctx, cli); err != nil {
		t.Fatal(err)
	}
}

// authOn: etcd says that authentication is on.
func authOn(ctx context.Context, cli *clientv3.Client) error {
	resp, err := cli.AuthStatus(ctx)
	if err != nil {
		return fmt.Errorf("auth status: %w", err)
	}
	if !resp.Enabled {
		return fmt.Errorf("authentication is off")
	}
	return nil
}

// writesAcknowledged waits until the writer has n acknowledged writes.
func writesAcknowledged(t *testing.T, w *etcdload.Writer, n int, under string) {
	t.Helper()
	etcdload.Eventually(t, 2*time.Minute, fmt.Sprintf("%d writes acknowledged under %s", n, under), func() error {
		if got := w.Acknowledged(); got < n {
			return fmt.Errorf("%d acknowledged, %d failed: %s", got, w.Failures(), w.ErrorsSeen())
		}
		return nil
	})
}
