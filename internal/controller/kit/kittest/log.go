// Package kittest helps the reconcilers' unit tests: it captures what a reconcile logs, with
// the keys controller-runtime gives every reconcile, so that a test can read a V(1) line as an
// SRE would.
package kittest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// ReconcileID is the reconcile ID of every captured line.
const ReconcileID = "7d3f-test"

// Lines is what a reconcile logged, one decoded JSON object a line.
type Lines []map[string]any

// Steps are the lines that say which step a reconcile took (kit.Step's).
func (l Lines) Steps() Lines {
	var out Lines
	for _, line := range l {
		if _, ok := line["step"]; ok {
			out = append(out, line)
		}
	}
	return out
}

// Log keeps what the reconciles of one object log, up to V(1).
type Log struct {
	t          testing.TB
	controller string
	key        types.NamespacedName
	ctx        context.Context
	mu         sync.Mutex
	lines      Lines
}

// NewLog captures the lines of controller's reconciles of the kind's object at key: its
// Context's logger carries the keys controller-runtime's LogConstructor gives a request.
func NewLog(t testing.TB, controller, kind string, key types.NamespacedName) *Log {
	l := &Log{t: t, controller: controller, key: key}
	sink := funcr.NewJSON(l.keep, funcr.Options{Verbosity: 1})
	lg := sink.WithValues("controller", controller, "controllerGroup", etcdv1.GroupVersion.Group, "controllerKind", kind,
		kind, klog.KRef(key.Namespace, key.Name), "namespace", key.Namespace, "name", key.Name, "reconcileID", ReconcileID)
	l.ctx = logr.NewContext(context.Background(), lg)
	return l
}

// Context is a reconcile's context, logging into l.
func (l *Log) Context() context.Context { return l.ctx }

func (l *Log) keep(obj string) {
	line := map[string]any{}
	if err := json.Unmarshal([]byte(obj), &line); err != nil {
		l.t.Errorf("log line %s: %v", obj, err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

// Take returns the lines logged since the last Take, and forgets them.
func (l *Log) Take() Lines {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	return out
}

// Reconcile runs one reconcile of the object by r, fails the test on its error, and returns
// its step line (Step).
func (l *Log) Reconcile(r reconcile.Reconciler) map[string]any {
	l.t.Helper()
	if _, err := r.Reconcile(l.ctx, reconcile.Request{NamespacedName: l.key}); err != nil {
		l.t.Fatalf("reconcile: %v", err)
	}
	return l.Step()
}

// Step is the one step line of the lines logged since the last Take; the test fails unless
// there is exactly one, carrying the reconcile's keys, at V(1).
func (l *Log) Step() map[string]any {
	l.t.Helper()
	steps := l.Take().Steps()
	if len(steps) != 1 {
		l.t.Fatalf("want one step line a reconcile, got %v", steps)
	}
	line := steps[0]
	if line["reconcileID"] != ReconcileID || line["controller"] != l.controller || line["name"] != l.key.Name {
		l.t.Errorf("the line lacks the reconcile's logger keys: %v", line)
	}
	if line["level"] != float64(1) {
		l.t.Errorf("want the step line at V(1): %v", line)
	}
	return line
}
