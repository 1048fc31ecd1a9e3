package plugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/quorumkeeper/etcd-operator/internal/defragplan"
)

func newDefragCommand(o *Options) *cobra.Command {
	var all bool
	cmd := o.command("defrag CLUSTER [MEMBER | --all]", "Defragment one member, or every member one at a time with the leader last, never below the quorum",
		cobra.RangeArgs(1, 2), 1, func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 2) {
				return errors.New("name one MEMBER or pass --all")
			}
			return o.withSession(func(cmd *cobra.Command, s *Session, args []string) error {
				targets, err := s.defragTargets(cmd.Context(), args[1:])
				if err != nil {
					return err
				}
				for _, name := range targets {
					if err := s.defragOne(cmd.Context(), o, name); err != nil {
						return err
					}
					say(o.Out, "defragmented %s\n", name)
				}
				return nil
			})(cmd, args)
		})
	cmd.Flags().BoolVar(&all, "all", false, "defragment every member, one at a time, the leader last")
	return cmd
}

// defragTargets are the named member, or all members in defragOrder.
func (s *Session) defragTargets(ctx context.Context, named []string) ([]string, error) {
	if len(named) == 1 {
		if _, err := s.memberByName(named[0]); err != nil {
			return nil, err
		}
		if _, ok := s.Endpoints[named[0]]; !ok {
			return nil, fmt.Errorf("member %s has no running Pod", named[0])
		}
		return named, nil
	}
	var names []string
	leader := ""
	for name, a := range s.statuses(ctx) {
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
func (s *Session) defragOne(ctx context.Context, o *Options, name string) error {
	reachable := slices.Sorted(maps.Keys(s.Endpoints))
	moved, err := defragplan.Member(ctx, s.Etcd, reachable, func(n string) string { return s.Endpoints[n] }, name)
	if moved {
		say(o.Err, "moved leadership away from %s before defragmenting it\n", name)
	}
	if err != nil {
		return fmt.Errorf("defragment %s: %w", name, err)
	}
	return nil
}
