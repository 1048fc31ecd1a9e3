package kit

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Step is what one reconcile decided, for the line Log writes: the step it took ("" when
// none applies), whether it changed something, why it waits (a Waiting) or cannot (another
// error), and the facts it decided on as key-value pairs. Facts are counts, names, phases and
// reasons: never anything read from a Secret.
type Step struct {
	Name    string
	Changed bool
	Why     error
	Facts   []any
}

// Log says at V(1), through ctx's logger (so with the controller, the object and the reconcile
// ID), what the reconcile decided: "step taken", "step waits" (with waitReason and why), "step
// failed" (with error) or "no step applies", with step, changed and the facts, as the
// EtcdCluster reconciler does. err, the error the reconcile returns, outranks s.Why: a step
// that meant to wait but could not write its status failed. changed is s.Changed also then:
// a step that failed may have written before it did (a member taken out of etcd, then its
// PVC not deleted), and the line must not hide it.
func (s Step) Log(ctx context.Context, err error) {
	lg := log.FromContext(ctx).V(1)
	if !lg.Enabled() {
		return
	}
	why := s.Why
	if err != nil {
		why = err
	}
	kv := append([]any{"step", s.Name, "changed", s.Changed}, s.Facts...)
	var w Waiting
	switch {
	case errors.As(why, &w):
		lg.Info("step waits", append(kv, "waitReason", w.Reason, "why", w.Message)...)
	case why != nil:
		lg.Info("step failed", append(kv, "error", why.Error())...)
	case s.Name == "":
		lg.Info("no step applies", kv...)
	default:
		lg.Info("step taken", kv...)
	}
}
