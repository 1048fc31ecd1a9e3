package moveleader

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/quorumkeeper/etcd-operator/internal/defragplan"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// NewCmd is `kubectl etcd move-leader`, also called forfeit-leadership as in Cozystack's
// plugin, whose command of that name has the leader hand leadership to another voter.
func NewCmd(o *cli.Options) *cobra.Command {
	cmd := o.Command("move-leader CLUSTER [MEMBER]",
		"Hand leadership to a voting member; without MEMBER, from the leader to another healthy voter",
		cobra.RangeArgs(1, 2), 1, o.WithSession(func(cmd *cobra.Command, s *cli.Session, args []string) error {
			if len(args) == 1 {
				return forfeit(cmd, o, s)
			}
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
	cmd.Aliases = []string{"forfeit-leadership"}
	return cmd
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

// forfeit has the leader hand leadership to another healthy voter, as the defragmentation
// does before it defragments the leader.
func forfeit(cmd *cobra.Command, o *cli.Options, s *cli.Session) error {
	reachable := slices.Sorted(maps.Keys(s.Endpoints))
	view, err := defragplan.Look(cmd.Context(), s.Etcd, reachable, func(n string) string { return s.Endpoints[n] })
	if err != nil {
		return err
	}
	from, to, err := forfeitTarget(view)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Cluster.Name, err)
	}
	if err := s.Etcd.MoveLeader(cmd.Context(), view.Members[to].ID); err != nil {
		return err
	}
	cli.Say(o.Out, "%s handed leadership to %s (%s)\n", from, to, etcd.FormatID(view.Members[to].ID))
	return nil
}

// forfeitTarget names the leader and the voter to take leadership from it: the first healthy
// voter by name other than the leader.
func forfeitTarget(view defragplan.PassView) (from, to string, err error) {
	for _, name := range slices.Sorted(maps.Keys(view.Members)) {
		m := view.Members[name]
		if m.InEtcd && view.Leader != 0 && m.ID == view.Leader {
			from = name
		}
	}
	if from == "" {
		return "", "", errors.New("no reachable member leads (kubectl etcd status shows who does)")
	}
	for _, name := range slices.Sorted(maps.Keys(view.Members)) {
		m := view.Members[name]
		if name != from && m.InEtcd && !m.Learner && m.Healthy {
			return from, name, nil
		}
	}
	return "", "", fmt.Errorf("%s leads and no other voter is healthy to take over", from)
}
