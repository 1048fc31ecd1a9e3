package plugin

import (
	"fmt"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func newCompactCommand(o *Options) *cobra.Command {
	var revision int64
	cmd := o.command("compact CLUSTER", "Compact the key history up to the current (or a given) revision",
		cobra.ExactArgs(1), 0, o.withSession(func(cmd *cobra.Command, s *Session, _ []string) error {
			if revision == 0 {
				rev, err := s.Etcd.CompactToCurrent(cmd.Context())
				if err != nil {
					return err
				}
				say(o.Out, "compacted revision %d\n", rev)
				return nil
			}
			cli, err := s.clientv3For(s.anyEndpoint())
			if err != nil {
				return err
			}
			defer func() { _ = cli.Close() }()
			if _, err := cli.Compact(cmd.Context(), revision, clientv3.WithCompactPhysical()); err != nil {
				return fmt.Errorf("compact to revision %d: %w", revision, err)
			}
			say(o.Out, "compacted revision %d\n", revision)
			return nil
		}))
	cmd.Flags().Int64Var(&revision, "revision", 0, "revision to compact to (default: the current one)")
	return cmd
}

// anyEndpoint is the forwarded endpoint of the first member with one.
func (s *Session) anyEndpoint() string {
	for _, m := range s.Members {
		if ep, ok := s.Endpoints[m.Name]; ok {
			return ep
		}
	}
	return ""
}
