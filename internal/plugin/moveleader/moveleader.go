package moveleader

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// NewCmd is `kubectl etcd move-leader`.
func NewCmd(o *cli.Options) *cobra.Command {
	return o.Command("move-leader CLUSTER MEMBER", "Hand leadership to a voting member",
		cobra.ExactArgs(2), 1, o.WithSession(func(cmd *cobra.Command, s *cli.Session, args []string) error {
			id, err := memberID(cmd, s, args[1])
			if err != nil {
				return err
			}
			if err := s.Etcd.MoveLeader(cmd.Context(), id); err != nil {
				return err
			}
			cli.Say(o.Out, "%s (%s) leads\n", args[1], etcd.FormatID(id))
			return nil
		}))
}

// memberID is the etcd ID of a member, from etcd's own member list.
func memberID(cmd *cobra.Command, s *cli.Session, name string) (uint64, error) {
	_, members, err := s.Etcd.MemberList(cmd.Context())
	if err != nil {
		return 0, err
	}
	for _, m := range members {
		if m.Name == name {
			if m.IsLearner {
				return 0, fmt.Errorf("%s is a learner; only a voter can lead", name)
			}
			return m.ID, nil
		}
	}
	return 0, fmt.Errorf("etcd knows no started member %q (kubectl etcd members %s)", name, s.Cluster.Name)
}
