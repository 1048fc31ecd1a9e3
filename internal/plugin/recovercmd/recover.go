package recovercmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// NewCmd is `kubectl etcd recover`.
func NewCmd(o *cli.Options) *cobra.Command {
	var from, fromSnapshot string
	var timeout time.Duration
	cmd := o.Command("recover CLUSTER [--from MEMBER | --from-snapshot ETCDSNAPSHOT]",
		"Rebuild a cluster that lost its quorum from one member or from an EtcdSnapshot (without either: show what each member has)",
		cobra.ExactArgs(1), 0, o.WithCluster(func(ctx context.Context, k *cli.Kube, c *etcdv1.EtcdCluster) error {
			if err := checkRecover(meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable)); err != nil {
				return err
			}
			var req recoveryRequest
			switch {
			case from != "" && fromSnapshot != "":
				return errors.New("--from and --from-snapshot exclude each other: rebuild from one member, or from one snapshot")
			case from != "":
				if err := checkMember(ctx, k, c, from); err != nil {
					return err
				}
				req = memberRequest(from)
			case fromSnapshot != "":
				if err := checkSnapshot(ctx, k, c, fromSnapshot); err != nil {
					return err
				}
				req = snapshotRequest(fromSnapshot)
			default:
				cli.Say(o.Out, "%s\nTo rebuild %s from one of them (the writes it does not have are lost): kubectl etcd recover %s --from MEMBER\nTo rebuild it from a snapshot (the writes after it are lost): kubectl etcd recover %s --from-snapshot ETCDSNAPSHOT\n",
					meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable).Message, c.Name, c.Name, c.Name)
				return nil
			}
			if err := requestRecovery(ctx, k, c, req); err != nil {
				return err
			}
			cli.Say(o.Out, "asked the operator to recover %s (annotation %s=%s)\n", c.Name, req.annotation, req.value)
			answer, err := awaitRecoveryAnswer(ctx, k, c.Name, req, timeout)
			if err != nil {
				return err
			}
			cli.Say(o.Out, "%s\nfollow it with kubectl etcd status %s\n", answer, c.Name)
			return nil
		}))
	cmd.Flags().StringVar(&from, "from", "", "the member whose data the cluster is rebuilt from")
	cmd.Flags().StringVar(&fromSnapshot, "from-snapshot", "", "the EtcdSnapshot (Complete, of this cluster) the cluster is rebuilt from")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait for the operator to take up the request")
	return cmd
}

// recoveryRequest is one of the operator's two recovery annotations, its value, and the words
// that begin the operator's statement of what that recovery loses.
type recoveryRequest struct {
	annotation, value, stated string
}

func memberRequest(member string) recoveryRequest {
	return recoveryRequest{annotation: etcdv1.AnnotationRecoverFrom, value: member, stated: etcdv1.RecoveryKeyPrefix(member)}
}

func snapshotRequest(snapshot string) recoveryRequest {
	return recoveryRequest{annotation: etcdv1.AnnotationRecoverFromSnapshot, value: snapshot, stated: etcdv1.SnapshotRecoveryKeyPrefix(snapshot)}
}

// checkRecover refuses a recovery unless the operator reports the quorum lost: on a cluster
// with a quorum it would throw members away for nothing.
func checkRecover(available *metav1.Condition) error {
	if available == nil {
		return errors.New("the cluster has no Available condition yet: the operator has not looked at it; nothing to recover")
	}
	if available.Reason != etcdv1.ReasonQuorumLost {
		return fmt.Errorf("the cluster has not lost its quorum (Available %s, %s: %s): nothing to recover; a broken member is replaced with kubectl etcd replace-member",
			available.Status, available.Reason, available.Message)
	}
	return nil
}

// checkMember: the cluster has that member.
func checkMember(ctx context.Context, k *cli.Kube, c *etcdv1.EtcdCluster, source string) error {
	members, err := k.Members(ctx, c.Name)
	if err != nil {
		return err
	}
	var names []string
	for _, m := range members {
		names = append(names, m.Name)
	}
	if !slices.Contains(names, source) {
		return fmt.Errorf("cluster %s has no member %q; its members are %v", c.Name, source, names)
	}
	return nil
}

// checkSnapshot: the EtcdSnapshot exists and is Complete. The operator checks the rest (whose
// data it holds) and answers in the cluster's status.
func checkSnapshot(ctx context.Context, k *cli.Kube, c *etcdv1.EtcdCluster, name string) error {
	s := &etcdv1.EtcdSnapshot{}
	if err := k.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("there is no EtcdSnapshot %q in namespace %s (kubectl get etcdsnapshots)", name, c.Namespace)
		}
		return cli.ExplainForbidden(err, "get etcdsnapshots.etcd-operator.cozystack.io")
	}
	if s.Status.Phase != etcdv1.SnapshotComplete {
		return fmt.Errorf("EtcdSnapshot %s is %q, not Complete: only a snapshot stored and verified can be restored", name, s.Status.Phase)
	}
	return nil
}

// requestRecovery sets the request on the cluster at the version checked. The operator writes
// the status of a cluster without a quorum on its own (each member's term and index), so a
// conflict is common: the cluster is then read and checked again (the quorum may be back), and
// the request made at the new version.
func requestRecovery(ctx context.Context, k *cli.Kube, c *etcdv1.EtcdCluster, req recoveryRequest) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := k.PatchCluster(ctx, c, map[string]any{req.annotation: req.value}, nil)
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh, getErr := k.Cluster(ctx, c.Name)
		if getErr != nil {
			return getErr
		}
		if checkErr := checkRecover(meta.FindStatusCondition(fresh.Status.Conditions, etcdv1.ConditionAvailable)); checkErr != nil {
			return checkErr
		}
		*c = *fresh
		return err
	})
}

// awaitRecoveryAnswer waits until the operator either states what the requested recovery
// loses (it has taken it up) or refuses it, and returns that statement.
func awaitRecoveryAnswer(ctx context.Context, k *cli.Kube, cluster string, req recoveryRequest, timeout time.Duration) (string, error) {
	var answer string
	var refusal error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		c, err := k.Cluster(ctx, cluster)
		if err != nil {
			return false, err
		}
		var done bool
		answer, done, refusal = recoveryAnswer(c, req)
		return done, nil
	})
	if refusal != nil {
		return "", refusal
	}
	if err != nil {
		return "", fmt.Errorf("the operator has not answered the recovery request within %s (is it running?); the request stays: follow it with kubectl etcd status %s", timeout, cluster)
	}
	return answer, nil
}

// recoveryAnswer reads the operator's answer to the request off the cluster: done once it
// stated the loss (or finished: the request is gone) or refused.
func recoveryAnswer(c *etcdv1.EtcdCluster, req recoveryRequest) (answer string, done bool, refusal error) {
	if c.Annotations[req.annotation] != req.value {
		return "the operator has finished with the request (it is gone): see kubectl etcd status and the cluster's events", true, nil
	}
	p := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionProgressing)
	switch {
	case p == nil:
		return "", false, nil
	case p.Reason == etcdv1.ReasonRecoveryRefused && strings.Contains(p.Message, req.annotation+"="+req.value+" "):
		return "", true, fmt.Errorf("the operator refused the recovery: %s", p.Message)
	case p.Reason == etcdv1.ReasonQuorumRecovery && strings.Contains(p.Message, req.stated):
		return "the operator is recovering: " + p.Message, true, nil
	}
	return "", false, nil
}
