package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/docs"
)

// The namespace and cluster of docs/official-guide.md, which names them in every command as
// the official operator's guide does.
const (
	guideNamespace = "cpaas-system"
	guideCluster   = "etcd-main"
)

// guideServerCerts is where the official guide's etcdctl commands read the certificate.
const guideServerCerts = "/etc/etcd/certs/server/"

// docs/official-guide.md as a reader runs it: the official etcd operator's deployment guide,
// its CA and its EtcdCluster (converted by kubectl etcd convert) applied, then its
// verification and troubleshooting commands exactly as the guide writes them, in one bash
// with kubectl and the plugin on PATH. Each command must succeed within its timeout and print
// what a one-word comment says; the guide's four etcdctl checks must also say what they check
// (a healthy endpoint, three started members over https, the key read back). Then only the
// member Pods carry the guide's label, and the certificates carry the guide's lifetime. Uses
// cert-manager (hack/e2e.sh installs it) and the namespace cpaas-system.
func TestOfficialGuideAsWritten(t *testing.T) {
	t.Parallel()
	w := readWalkthrough(t, "docs/official-guide.md")
	ns := namespace(t)
	claimNamespace(t, guideNamespace)
	dir := t.TempDir()
	for name, text := range w.Files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sh := startShell(t, dir, dir, walkthroughEnv(t, dir, ns, w))
	checked := 0
	for _, c := range w.Commands {
		stdout, stderr, err := sh.run(c.Text, c.Timeout())
		t.Logf("official-guide.md:%d: %s\n%s%s", c.Line, c.Text, stdout, stderr)
		if msg := judge(c, stdout, stderr, err); msg != "" {
			t.Fatalf("official-guide.md:%d: %s: %s", c.Line, c.Text, msg)
		}
		if msg, ok := guideCheck(c, stdout); ok {
			checked++
			if msg != "" {
				t.Fatalf("official-guide.md:%d: %s: %s", c.Line, c.Text, msg)
			}
		}
	}
	if checked != 4 {
		t.Fatalf("%d of the guide's four etcdctl checks (endpoint health, member list, put, get) ran", checked)
	}
	requireGuideLabelOnMembersOnly(t)
}

// guideCheck judges the output of one of the guide's etcdctl commands (those that read the
// certificate at the guide's path); ok is false for any other command.
func guideCheck(c docs.Command, stdout string) (msg string, ok bool) {
	if !strings.Contains(c.Text, guideServerCerts) {
		return "", false
	}
	text := strings.TrimSpace(c.Text)
	switch {
	case strings.HasSuffix(text, "endpoint health"):
		if !strings.Contains(stdout, "is healthy") {
			return "the member is not reported healthy", true
		}
	case strings.HasSuffix(text, "member list"):
		if strings.Count(stdout, "started") != 3 || strings.Count(stdout, "https://") != 6 {
			return "want three started members with https peer and client URLs", true
		}
	case strings.Contains(text, "put test-key Hello"):
		// Its one-word comment (# OK) is checked by judge.
	case strings.HasSuffix(text, "get test-key"):
		if stdout != "test-key\nHello\n" {
			return "want test-key, then Hello", true
		}
	default:
		return "an etcdctl command of the guide this test does not know: check its output here too", true
	}
	return "", true
}

// requireGuideLabelOnMembersOnly: `-l controller=etcd-main` selects exactly the cluster's
// member Pods, the ones the guide's `.items[0]` may pick.
func requireGuideLabelOnMembersOnly(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(guideNamespace), client.MatchingLabels{etcdv1.LabelGuideController: guideCluster}); err != nil {
		t.Fatal(err)
	}
	members := &etcdv1.EtcdMemberList{}
	if err := k8s.List(ctx, members, client.InNamespace(guideNamespace), client.MatchingLabels{etcdv1.LabelCluster: guideCluster}); err != nil {
		t.Fatal(err)
	}
	var labelled, want []string
	for _, p := range pods.Items {
		labelled = append(labelled, p.Name)
	}
	for _, m := range members.Items {
		want = append(want, m.Name)
	}
	slices.Sort(labelled)
	slices.Sort(want)
	if len(want) != 3 || !slices.Equal(labelled, want) {
		t.Fatalf("controller=%s selects Pods %v; want exactly the members %v", guideCluster, labelled, want)
	}
}

// claimNamespace waits until no namespace of that name is left from an earlier run, and
// deletes the one this run makes when the test ends.
func claimNamespace(t *testing.T, name string) {
	t.Helper()
	key := client.ObjectKey{Name: name}
	eventually(t, 5*time.Minute, "namespace "+name+" from an earlier run gone", func() error {
		err := k8s.Get(context.Background(), key, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
			return errors.New("still there")
		}
		return err
	})
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
}
