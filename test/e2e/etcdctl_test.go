package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// guideEtcdctlArgs is etcdctl the way the official operator's guide types it: the member's
// DNS name without a scheme and every TLS flag spelled out, with the certificate paths our
// docs give (docs/tls.md). It works only if the container sets no ETCDCTL_* variable.
func guideEtcdctlArgs(ns, cluster, member string, args ...string) []string {
	return append([]string{"exec", member, "--", "etcdctl",
		fmt.Sprintf("--endpoints=%s.%s.%s.svc.cluster.local:2379", member, cluster, ns),
		"--cacert=/etc/etcd/tls/server/ca.crt",
		"--cert=/etc/etcd/tls/server/tls.crt",
		"--key=/etc/etcd/tls/server/tls.key",
	}, args...)
}

// guideEtcdctl runs a guide-style etcdctl command in a member and fails the test on error.
func guideEtcdctl(t *testing.T, ns, cluster, member string, args ...string) string {
	t.Helper()
	return kubectl(t, ns, guideEtcdctlArgs(ns, cluster, member, args...)...)
}

// checkGuideCommands runs the four checks of the official operator's guide (endpoint health,
// member list, put, get) verbatim apart from the paths, as a new user would type them.
func checkGuideCommands(t *testing.T, ns, cluster, member string, members int) {
	t.Helper()
	if out := guideEtcdctl(t, ns, cluster, member, "endpoint", "health"); !strings.Contains(out, "is healthy") {
		t.Fatalf("endpoint health: %q", out)
	}
	if out := guideEtcdctl(t, ns, cluster, member, "member", "list"); strings.Count(out, "started") != members || strings.Count(out, "https://") != 2*members {
		t.Fatalf("member list: want %d started members with https peer and client URLs:\n%s", members, out)
	}
	if out := guideEtcdctl(t, ns, cluster, member, "put", "test-key", "Hello"); strings.TrimSpace(out) != "OK" {
		t.Fatalf("put: %q", out)
	}
	if out := guideEtcdctl(t, ns, cluster, member, "get", "test-key"); out != "test-key\nHello\n" {
		t.Fatalf("get: %q", out)
	}
}
