package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller"
)

// AnnotationRecoverFrom on an EtcdCluster asks the operator to rebuild a cluster that lost
// its quorum from one member's data (the operator's own mechanism: it states what is lost,
// removes and stops the other members, restarts that member with --force-new-cluster and adds
// new members as learners).
const AnnotationRecoverFrom = controller.AnnotationRecoverFrom

func newRecoverCommand(o *Options) *cobra.Command {
	var from string
	var timeout time.Duration
	cmd := o.command("recover CLUSTER [--from MEMBER]",
		"Rebuild a cluster that lost its quorum from one member (without --from: show what each member has)",
		cobra.ExactArgs(1), 0, o.withCluster(func(ctx context.Context, k *Kube, c *etcdv1.EtcdCluster) error {
			if err := checkRecover(meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable)); err != nil {
				return err
			}
			if from == "" {
				say(o.Out, "%s\nTo rebuild %s from one of them (the writes it does not have are lost): kubectl etcd recover %s --from MEMBER\n",
					meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable).Message, c.Name, c.Name)
				return nil
			}
			if err := requestRecovery(ctx, k, c, from); err != nil {
				return err
			}
			say(o.Out, "asked the operator to recover %s from %s (annotation %s=%s)\n", c.Name, from, AnnotationRecoverFrom, from)
			answer, err := awaitRecoveryAnswer(ctx, k, c.Name, from, timeout)
			if err != nil {
				return err
			}
			say(o.Out, "%s\nfollow it with kubectl etcd status %s\n", answer, c.Name)
			return nil
		}))
	cmd.Flags().StringVar(&from, "from", "", "the member whose data the cluster is rebuilt from")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait for the operator to take up the request")
	return cmd
}

// checkRecover refuses a recovery unless the operator reports the quorum lost: on a cluster
// with a quorum it would throw members away for nothing.
func checkRecover(available *metav1.Condition) error {
	if available == nil {
		return errors.New("the cluster has no Available condition yet: the operator has not looked at it; nothing to recover")
	}
	if available.Reason != controller.ReasonQuorumLost {
		return fmt.Errorf("the cluster has not lost its quorum (Available %s, %s: %s): nothing to recover; a broken member is replaced with kubectl etcd replace-member",
			available.Status, available.Reason, available.Message)
	}
	return nil
}

func requestRecovery(ctx context.Context, k *Kube, c *etcdv1.EtcdCluster, source string) error {
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
	return patchCluster(ctx, k, c, map[string]any{AnnotationRecoverFrom: source}, nil)
}

// awaitRecoveryAnswer waits until the operator either states what the recovery from source
// loses (it has taken it up) or refuses it, and returns that statement.
func awaitRecoveryAnswer(ctx context.Context, k *Kube, cluster, source string, timeout time.Duration) (string, error) {
	var answer string
	var refusal error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		c, err := k.Cluster(ctx, cluster)
		if err != nil {
			return false, err
		}
		var done bool
		answer, done, refusal = recoveryAnswer(c, source)
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

// recoveryAnswer reads the operator's answer to a recovery from source off the cluster:
// done once it stated the loss (or finished: the request is gone) or refused.
func recoveryAnswer(c *etcdv1.EtcdCluster, source string) (answer string, done bool, refusal error) {
	if c.Annotations[AnnotationRecoverFrom] != source {
		return "the operator has finished the recovery (the request is gone)", true, nil
	}
	p := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionProgressing)
	switch {
	case p == nil:
		return "", false, nil
	case p.Reason == controller.ReasonRecoveryRefused && strings.Contains(p.Message, AnnotationRecoverFrom+"="+source+" "):
		return "", true, fmt.Errorf("the operator refused the recovery: %s", p.Message)
	case p.Reason == controller.ReasonQuorumRecovery && strings.Contains(p.Message, "recovering from member "+source+" "):
		return "the operator is recovering: " + p.Message, true, nil
	}
	return "", false, nil
}
