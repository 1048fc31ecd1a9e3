package cluster

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// logLines is what a reconcile logged, one decoded JSON object a line.
type logLines []map[string]any

// reconcileLogged runs one reconcile of the harness's cluster with a logger that carries the
// keys controller-runtime gives every reconcile, at V(1), and returns the lines it logged.
func (h *harness) reconcileLogged() logLines {
	h.t.Helper()
	h.realizeMembers()
	var lines logLines
	sink := funcr.NewJSON(func(obj string) {
		line := map[string]any{}
		if err := json.Unmarshal([]byte(obj), &line); err != nil {
			h.t.Fatalf("log line %s: %v", obj, err)
		}
		lines = append(lines, line)
	}, funcr.Options{Verbosity: 1})
	// As controller-runtime's controller builds it for a request (LogConstructor).
	lg := sink.WithValues("controller", "etcdcluster", "controllerGroup", "etcd.quorumkeeper.io", "controllerKind", "EtcdCluster",
		"EtcdCluster", klog.KRef("ns", "db"), "namespace", "ns", "name", "db", "reconcileID", "7d3f-test")
	ctx := logr.NewContext(context.Background(), lg)
	if _, err := h.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "db"}}); err != nil {
		h.t.Fatalf("reconcile: %v", err)
	}
	return lines
}

// with are the lines whose key k has value v.
func (l logLines) with(k string, v any) logLines {
	var out logLines
	for _, line := range l {
		if line[k] == v {
			out = append(out, line)
		}
	}
	return out
}

// checkReconcileKeys fails unless line carries the controller and the reconcile ID of the
// reconcile that logged it.
func checkReconcileKeys(t *testing.T, line map[string]any) {
	t.Helper()
	if line["reconcileID"] != "7d3f-test" || line["controller"] != "etcdcluster" || line["name"] != "db" {
		t.Errorf("the line lacks the reconcile's logger keys: %v", line)
	}
}

func TestAnEventIsLoggedWithTheReconcileAndTheObjectsKind(t *testing.T) {
	h := newHarness(t)
	lines := h.reconcileLogged().with("logger", "events").with("reason", "Bootstrapping")
	if len(lines) != 1 {
		t.Fatalf("want one logged Bootstrapping event, got %v", lines)
	}
	line := lines[0]
	checkReconcileKeys(t, line)
	if line["kind"] != "EtcdCluster" || line["type"] != "Normal" || line["msg"] != "bootstrapping 3 members: db-1, db-2, db-3" {
		t.Errorf("want the event's Kind, type and message: %v", line)
	}
	if obj, _ := line["object"].(map[string]any); obj["name"] != "db" || obj["namespace"] != "ns" {
		t.Errorf("want the event's object by namespace and name: %v", line)
	}
}

func TestAnEventAboutAMemberNamesItsKind(t *testing.T) {
	h := runningHarness(t)
	h.setReplicas(4)
	lines := h.reconcileLogged().with("logger", "events").with("reason", "ScalingOut")
	if len(lines) != 1 {
		t.Fatalf("want one logged ScalingOut event, got %v", lines)
	}
	checkReconcileKeys(t, lines[0])
	if rel, _ := lines[0]["related"].(map[string]any); lines[0]["relatedKind"] != "EtcdMember" || rel["name"] != "db-4" {
		t.Errorf("want the related member and its Kind: %v", lines[0])
	}
}

func TestTheStepTakenIsLoggedAtV1OncePerReconcile(t *testing.T) {
	h := newHarness(t)
	lines := h.reconcileLogged().with("msg", "step taken")
	if len(lines) != 1 {
		t.Fatalf("want one step line, got %v", lines)
	}
	line := lines[0]
	checkReconcileKeys(t, line)
	if line["level"] != float64(1) || line["step"] != "bootstrap" || line["reachable"] != false || line["replicas"] != float64(3) {
		t.Errorf("want the bootstrap step at V(1) with the view it acted on: %v", line)
	}
}

func TestAStepThatWaitsIsLoggedWithItsReason(t *testing.T) {
	h, _ := scaleInWithoutQuorum(t)
	lines := h.reconcileLogged().with("msg", "step waits")
	if len(lines) != 1 {
		t.Fatalf("want one step line, got %v", lines)
	}
	if lines[0]["step"] != "scale" || lines[0]["waitReason"] == nil {
		t.Errorf("want the scale step and why it waits: %v", lines[0])
	}
}
