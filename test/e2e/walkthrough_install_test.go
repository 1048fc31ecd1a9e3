package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/quorumkeeper/etcd-operator/test/docs"
)

const (
	// installDocRelease is the release docs/install.md installs.
	installDocRelease = "etcd-operator"
	// installDocFullname names the release's objects and installDocLeaseID its leader
	// election: under the doc's release name they would be config/default's operator's.
	installDocFullname = "eo-installdoc-operator"
	installDocLeaseID  = "eo-installdoc"
)

// installDocVersionRE is the version of the release install.md makes.
var installDocVersionRE = regexp.MustCompile(`^make release VERSION=(\S+)`)

// docs/install.md as a reader runs it, from the checkout's root: every command of its shell
// blocks marked run, in order, in one bash. It makes a release (for this machine's platform:
// IMAGE_PLATFORMS and PLUGIN_PLATFORMS, which the doc names) and pushes it to a registry on
// this machine's loopback, which the doc's ${REGISTRY:-registry.example} names; helm installs
// it from there and the operator Pod runs the pushed image; the new release's CRDs are
// applied as an upgrade does; helm uninstalls it. The doc's helm is a wrapper that keeps the
// release apart from the other tests, which run on meanwhile: it installs into the test's
// own namespace (its --namespace comes last, so it wins over the doc's -n), with objects and
// a leader election id of its own, watching only that empty namespace, and speaks plain HTTP
// to the loopback registry. The release's dist/ and etcd-operator/crds are written in the
// checkout, as the doc's commands say, and removed at the end.
func TestInstallDocAsWritten(t *testing.T) {
	t.Parallel()
	w := readWalkthrough(t, "docs/install.md")
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://") // 127.0.0.1:PORT
	ns := namespace(t)
	dir := t.TempDir()
	root, err := filepath.Abs(docs.Root())
	if err != nil {
		t.Fatal(err)
	}
	claimReleaseOutputs(t, root)
	env := walkthroughEnv(t, dir, ns, w)
	env = append(env, installDocEnv(t, host)...)
	writeInstallDocHelm(t, dir, ns)
	t.Cleanup(func() { uninstallQuietly(ns) })

	image := host + "/etcd-operator:" + installDocVersion(t, w)
	sh := startShell(t, dir, root, env)
	runWalkthrough(t, "install.md", sh, w.Commands, func(c docs.Command) {
		if strings.HasPrefix(c.Text, "helm install") {
			pod := readyOperatorPod(t, ns)
			if got := pod.Status.ContainerStatuses[0].Image; got != image {
				t.Fatalf("install.md:%d: the operator Pod runs %s, want the pushed %s", c.Line, got, image)
			}
		}
	})
}

// installDocVersion is the VERSION of the doc's make release.
func installDocVersion(t *testing.T, w docs.Walkthrough) string {
	t.Helper()
	for _, c := range w.Commands {
		if m := installDocVersionRE.FindStringSubmatch(c.Text); m != nil {
			return m[1]
		}
	}
	t.Fatal("install.md runs no make release VERSION=...")
	return ""
}

// claimReleaseOutputs makes room in the checkout for what the doc's commands write there,
// dist/ and etcd-operator/ (the chart's CRDs), and removes them when the test ends. A dist/
// that is there already is moved aside and put back.
func claimReleaseOutputs(t *testing.T, root string) {
	t.Helper()
	dist, crds := filepath.Join(root, "dist"), filepath.Join(root, "etcd-operator")
	if _, err := os.Stat(crds); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is there (%v): install.md's tar writes it", crds, err)
	}
	aside := dist + ".before-" + t.Name()
	_, err := os.Stat(dist)
	kept := err == nil
	if kept {
		if err := os.Rename(dist, aside); err != nil {
			t.Fatalf("moving the checkout's dist/ aside: %v", err)
		}
	}
	t.Cleanup(func() {
		_ = os.RemoveAll(crds)
		_ = os.RemoveAll(dist)
		if kept {
			_ = os.Rename(aside, dist)
		}
	})
}

// installDocEnv is what install.md's commands need beyond a walkthrough's environment: the
// registry, this machine's platform only, and the Go caches of the test's own environment
// (the walkthrough's HOME is its own, where Go would start an empty cache).
func installDocEnv(t *testing.T, host string) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	paths := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(paths) != 3 {
		t.Fatalf("go env printed %q", out)
	}
	env := []string{
		"REGISTRY=" + host,
		"IMAGE_PLATFORMS=linux/" + goruntime.GOARCH,
		"PLUGIN_PLATFORMS=" + goruntime.GOOS + "/" + goruntime.GOARCH,
		"GOCACHE=" + paths[0], "GOMODCACHE=" + paths[1], "GOPATH=" + paths[2],
	}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name == "GOWORK" || name == "GOFLAGS" || name == "GOTOOLCHAIN" || name == "GOPROXY" {
			env = append(env, kv)
		}
	}
	return env
}

// installDocHelm is the doc's helm: E2E_HELM with the test's namespace last (the doc's -n
// loses to it) and, where they apply, the values that keep the release apart and plain HTTP
// for the loopback registry.
const installDocHelm = `#!/usr/bin/env bash
extra=()
case "$1" in
install|upgrade) extra=(--plain-http --set fullnameOverride=%[3]s --set leaderElection.id=%[4]s --set "watchNamespaces={%[2]s}") ;;
pull) extra=(--plain-http) ;;
esac
exec %[1]q "$@" --namespace %[2]s "${extra[@]}"
`

func writeInstallDocHelm(t *testing.T, dir, ns string) {
	t.Helper()
	bin := os.Getenv("E2E_HELM")
	if bin == "" {
		t.Fatal("E2E_HELM is not set: run through hack/e2e.sh, which builds helm")
	}
	script := fmt.Sprintf(installDocHelm, bin, ns, installDocFullname, installDocLeaseID)
	if err := os.WriteFile(filepath.Join(dir, "bin", "helm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// uninstallQuietly removes the release when the walkthrough stopped before its own helm
// uninstall; after it, there is nothing to remove, and helm's error says so.
func uninstallQuietly(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = exec.CommandContext(ctx, os.Getenv("E2E_HELM"), "uninstall", installDocRelease, "--namespace", ns, "--wait").Run()
}
