package defrag

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/quorumkeeper/etcd-operator/internal/defragplan"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// NewCmd is `kubectl etcd defrag`.
func NewCmd(o *cli.Options) *cobra.Command {
	var all bool
	cmd := o.Command("defrag CLUSTER [MEMBER | --all]", "Defragment one member, or every member one at a time with the leader last, never below the quorum",
		cobra.RangeArgs(1, 2), 1, func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 2) {
				return errors.New("name one MEMBER or pass --all")
			}
			return o.WithSession(func(cmd *cobra.Command, s *cli.Session, args []string) error {
				targets, err := defragTargets(cmd.Context(), s, args[1:])
				if err != nil {
					return err
				}
				for _, name := range targets {
					if err := defragOne(cmd.Context(), o, s, name); err != nil {
						return err
					}
					cli.Say(o.Out, "defragmented %s\n", name)
				}
				return nil
			})(cmd, args)
		})
	cmd.Flags().BoolVar(&all, "all", false, "defragment every member, one at a time, the leader last")
	return cmd
}

// defragTargets are the named member, or all members in defragOrder.
func defragTargets(ctx context.Context, s *cli.Session, named []string) ([]string, error) {
	if len(named) == 1 {
		if _, err := s.MemberByName(named[0]); err != nil {
			return nil, err
		}
		if _, ok := s.Endpoints[named[0]]; !ok {
			return nil, fmt.Errorf("member %s has no running Pod", named[0])
		}
		return named, nil
	}
	var names []string
	leader := ""
	for name, a := range s.Statuses(ctx) {
		if a.Err != nil {
			return nil, fmt.Errorf("member %s does not answer, defragment the others by name: %w", name, a.Err)
		}
		names = append(names, name)
		if a.Status.Leader == a.Status.MemberID {
			leader = name
		}
	}
	return defragOrder(names, leader), nil
}

// defragOne defragments one member through the EtcdDefrag controller's own steps: not below
// the quorum, leadership handed away first when the member leads.
func defragOne(ctx context.Context, o *cli.Options, s *cli.Session, name string) error {
	reachable := slices.Sorted(maps.Keys(s.Endpoints))
	moved, err := defragplan.Member(ctx, s.Etcd, reachable, func(n string) string { return s.Endpoints[n] }, name)
	if moved {
		cli.Say(o.Err, "moved leadership away from %s before defragmenting it\n", name)
	}
	if err != nil {
		return fmt.Errorf("defragment %s: %w", name, err)
	}
	return nil
}
