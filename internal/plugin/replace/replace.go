package replace

import (
	"encoding/json"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// NewCmd is `kubectl etcd replace-member`.
func NewCmd(o *cli.Options) *cobra.Command {
	var force bool
	cmd := o.Command("replace-member CLUSTER MEMBER", "Ask the operator to replace a member with a fresh one (annotation on its EtcdMember)",
		cobra.ExactArgs(2), 1, func(cmd *cobra.Command, args []string) error {
			s, err := o.Load(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			m, err := s.MemberByName(args[1])
			if err != nil {
				return err
			}
			voters, ready := readyVoters(s)
			if err := o.Overridable(checkReplace(voters, ready, isReadyVoter(s, m)), force); err != nil {
				return err
			}
			body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{etcdv1.AnnotationReplace: "true"}}})
			if err := s.Kube.Client.Patch(cmd.Context(), m, client.RawPatch("application/merge-patch+json", body)); err != nil {
				return cli.ExplainForbidden(err, "patch etcdmembers.etcd-operator.cozystack.io")
			}
			cli.Say(o.Out, "asked the operator to replace %s (annotation %s=true); follow it with kubectl etcd status %s\n", m.Name, etcdv1.AnnotationReplace, s.Cluster.Name)
			return nil
		})
	cmd.Flags().BoolVar(&force, "force", false, "replace even when the quorum could be lost meanwhile")
	return cmd
}

// readyVoters counts the voters and those whose Pod is ready, from the operator's objects.
func readyVoters(s *cli.Session) (voters, ready int) {
	for i := range s.Members {
		if s.Members[i].Status.Role == etcdv1.RoleLearner {
			continue
		}
		voters++
		if isReadyVoter(s, &s.Members[i]) {
			ready++
		}
	}
	return voters, ready
}

func isReadyVoter(s *cli.Session, m *etcdv1.EtcdMember) bool {
	p, ok := s.Pods[m.Name]
	return ok && m.Status.Role != etcdv1.RoleLearner && cli.PodReady(p)
}
