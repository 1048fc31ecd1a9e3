// Package restart is `kubectl etcd restart`: a rolling restart of every member, which the
// operator carries out with its own roll (the one that applies a changed Pod spec); the
// plugin asks for it with an annotation and follows it.
package restart

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

type flags struct {
	wait    bool
	timeout time.Duration
}

// NewCmd is `kubectl etcd restart`.
func NewCmd(o *cli.Options) *cobra.Command {
	f := &flags{}
	cmd := o.Command("restart CLUSTER",
		"Restart every member, one at a time, followers first and the leader last (the operator's own roll)",
		cobra.ExactArgs(1), 0, func(cmd *cobra.Command, args []string) error {
			s, err := o.Load(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return f.run(cmd.Context(), o, s)
		})
	cmd.Flags().BoolVar(&f.wait, "wait", true, "follow the restart until every member is back and the cluster is healthy")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Minute, "how long to follow the restart (the operator goes on after it)")
	return cmd
}

// run asks for the restart, when the cluster is at rest and healthy, by a new value of
// AnnotationRestartedAt, which is part of every member Pod's fingerprint: the operator's roll
// then restarts each member once, with its own gates (followers first, leadership moved away
// from the leader before its Pod goes, the next member only once every member is Ready and
// every voter healthy). The plugin deletes no Pod: a person running the command while the
// operator rolls would otherwise take two members down at once, and a restart cut short
// (a closed laptop) goes on.
func (f *flags) run(ctx context.Context, o *cli.Options, s *cli.Session) error {
	c := s.Cluster
	if err := refusal(c, s.Members, s.Pods); err != nil {
		return err
	}
	before := podUIDs(s.Pods)
	at := time.Now().UTC().Format(time.RFC3339)
	if err := s.Kube.PatchCluster(ctx, c, map[string]any{etcdv1.AnnotationRestartedAt: at}, nil); err != nil {
		return err
	}
	cli.Say(o.Out, "asked the operator to restart the %d members of %s (annotation %s=%s): one at a time, followers first, the leader last\n",
		len(s.Members), c.Name, etcdv1.AnnotationRestartedAt, at)
	if !f.wait {
		cli.Say(o.Out, "follow it with kubectl etcd status %s (Progressing says RollingUpdate until it is done)\n", c.Name)
		return nil
	}
	return f.follow(ctx, o, s.Kube, c.Name, before)
}

// follow reports each member as it is back on a new Pod, until all are and the cluster is at
// rest, or the timeout.
func (f *flags) follow(ctx context.Context, o *cli.Options, k *cli.Kube, name string, before map[string]types.UID) error {
	reported, lastWord := map[string]bool{}, ""
	var st rollState
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, f.timeout, false, func(ctx context.Context) (bool, error) {
		c, members, pods, err := k.Observe(ctx, name)
		if err != nil {
			return false, err
		}
		st = progress(before, c, members, pods)
		for _, m := range st.Back {
			if !reported[m] {
				reported[m] = true
				cli.Say(o.Out, "%s is back: new Pod Ready, etcd healthy (%d of %d)\n", m, len(st.Back), len(members))
			}
		}
		if word := operatorWord(c); word != lastWord {
			lastWord = word
			cli.Say(o.Err, "operator: %s\n", word)
		}
		return st.Done, nil
	})
	if err != nil {
		return fmt.Errorf("%s not restarted after %s (still waiting: %s; %s): the operator goes on by itself, follow it with kubectl etcd status %s; "+
			"if no member restarted at all, check that the operator knows %s (kubectl etcd version): %w",
			name, f.timeout, strings.Join(st.Waiting, ", "), lastWord, name, etcdv1.AnnotationRestartedAt, err)
	}
	cli.Say(o.Out, "restarted every member of %s; it is Available and at rest\n", name)
	return nil
}

// operatorWord is the Progressing condition, as the operator says what it is doing.
func operatorWord(c *etcdv1.EtcdCluster) string {
	p := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionProgressing)
	if p == nil {
		return "no Progressing condition yet"
	}
	return fmt.Sprintf("Progressing %s %s: %s", p.Status, p.Reason, p.Message)
}
