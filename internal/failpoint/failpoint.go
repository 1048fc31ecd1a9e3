// Package failpoint lets the end-to-end tests crash the operator right after a chosen step of
// a membership change, to prove that its successor converges from whatever state the crash
// left. It is off unless the operator's environment has ETCD_OPERATOR_FAILPOINTS=enabled;
// then an EtcdCluster annotated etcd-operator.cozystack.io/crash-after=<step>[,<step>...]
// makes the process exit at once after that step, as a kill would, with nothing after the
// step done: no status write, no event.
package failpoint

import (
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// EnvVar turns failpoints on when set to "enabled".
const EnvVar = "ETCD_OPERATOR_FAILPOINTS"

// ExitCode is the status the operator exits with at a failpoint, so a test can tell the crash
// it asked for from any other.
const ExitCode = 86

// The steps with a failpoint, each right after a change to etcd or to the API that a later
// reconcile must finish or undo.
const (
	AfterBootstrapMember = "bootstrap-member" // the first founding EtcdMember created
	AfterCreateMember    = "create-member"    // scale-out: EtcdMember created, not yet in etcd
	AfterAddLearner      = "add-learner"      // in etcd as a learner, not recorded in status
	AfterPromote         = "promote"          // promoted, no event, no status
	AfterRemovalMark     = "removal-mark"     // scale-in: marked for removal, not deleted
	AfterMemberRemove    = "member-remove"    // out of etcd, PVC and finalizer still there
	AfterDormantFlip     = "dormant-flip"     // pause or resume: one member flipped of several
)

// The steps of replacing members whose data is lost, and of rebuilding members from PVCs.
const (
	AfterReplaceMark     = "replace-mark"      // damaged member marked for removal, not deleted
	AfterRebuildMember   = "rebuild-member"    // an EtcdMember rebuilt from its PVC, status written
	AfterDeadVoterRemove = "dead-voter-remove" // a voter without data removed from etcd, no event
)

// The steps of a recovery from a snapshot.
const (
	AfterDiscardMark = "discard-mark" // a member marked to discard its data, not deleted
)

// enabled is read once: failpoints cannot be turned on in a running operator.
var enabled = os.Getenv(EnvVar) == "enabled"

// exit is os.Exit; tests of this package replace it.
var exit = os.Exit

// Crash ends the process if failpoints are on and the cluster asks for a crash after step.
func Crash(cluster metav1.Object, step string) {
	if !enabled || !Armed(cluster, step) {
		return
	}
	fmt.Fprintf(os.Stderr, "failpoint: crashing after %s of cluster %s/%s\n", step, cluster.GetNamespace(), cluster.GetName())
	exit(ExitCode)
}

// Armed reports whether the cluster's annotation names step.
func Armed(cluster metav1.Object, step string) bool {
	for _, s := range strings.Split(cluster.GetAnnotations()[etcdv1.AnnotationCrashAfter], ",") {
		if strings.TrimSpace(s) == step {
			return true
		}
	}
	return false
}
