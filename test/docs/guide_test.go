package docs

import (
	"strings"
	"testing"
)

// guideEtcdctl is how the official etcd operator's deployment guide runs etcdctl in a member
// (its verification section), line for line; each check appends its own arguments.
const guideEtcdctl = `kubectl exec -n cpaas-system $ETCD_POD -- etcdctl \
  --endpoints=$ETCD_POD.$ETCD_CLUSTER_NAME.$NAMESPACE.svc.cluster.local:2379 \
  --cacert=/etc/etcd/certs/server/ca.crt \
  --cert=/etc/etcd/certs/server/tls.crt \
  --key=/etc/etcd/certs/server/tls.key \
  `

// guidePodSelection is how the guide picks the member it runs etcdctl in.
const guidePodSelection = `ETCD_POD=$(kubectl get pods -n cpaas-system -l controller=$ETCD_CLUSTER_NAME -o jsonpath='{.items[0].metadata.name}')`

// docs/official-guide.md is a walkthrough test/e2e runs as written, and what it runs of the
// official operator's guide is the guide's own text: the Pod picked by its label, and its
// four etcdctl checks with its certificate paths, each marked run; every file it applies is
// one of its YAML blocks; it waits with kubectl wait, never with sleep.
func TestOfficialGuideIsAWalkthrough(t *testing.T) {
	t.Parallel()
	w, err := ParseWalkthrough(readDoc(t, "docs/official-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, c := range w.Commands {
		if strings.Contains(c.Text, "sleep") {
			t.Errorf("official-guide.md:%d: %q sleeps; wait for a condition with kubectl wait", c.Line, c.Text)
		}
		for _, m := range appliedFileRE.FindAllStringSubmatch(c.Text, -1) {
			if m[1] != "-" && w.Files[m[1]] == "" {
				t.Errorf("official-guide.md:%d: %q applies %s, which no YAML block starting with # %s holds", c.Line, c.Text, m[1], m[1])
			}
		}
		code, _, _ := strings.Cut(c.Text, "   #") // a trailing comment states the output
		ran[strings.TrimSpace(code)] = true
	}
	want := []string{guidePodSelection}
	for _, check := range []string{"endpoint health", "member list", "put test-key Hello", "get test-key"} {
		want = append(want, guideEtcdctl+check)
	}
	for _, cmd := range want {
		if !ran[cmd] {
			t.Errorf("official-guide.md runs no command that is the guide's\n%s", cmd)
		}
	}
	for _, name := range []string{"cpaas-ca.yaml", "root-ca-certificate.yaml", "ca-issuer.yaml", "etcd-cluster.yaml"} {
		if w.Files[name] == "" {
			t.Errorf("official-guide.md has no YAML block # %s", name)
		}
	}
}
