package compact

import (
	"fmt"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// NewCmd is `kubectl etcd compact`.
func NewCmd(o *cli.Options) *cobra.Command {
	var revision int64
	cmd := o.Command("compact CLUSTER", "Compact the key history up to the current (or a given) revision",
		cobra.ExactArgs(1), 0, o.WithSession(func(cmd *cobra.Command, s *cli.Session, _ []string) error {
			if revision == 0 {
				rev, err := s.Etcd.CompactToCurrent(cmd.Context())
				if err != nil {
					return err
				}
				cli.Say(o.Out, "compacted revision %d\n", rev)
				return nil
			}
			raw, err := s.ClientV3For(s.AnyEndpoint())
			if err != nil {
				return err
			}
			defer func() { _ = raw.Close() }()
			if _, err := raw.Compact(cmd.Context(), revision, clientv3.WithCompactPhysical()); err != nil {
				return fmt.Errorf("compact to revision %d: %w", revision, err)
			}
			cli.Say(o.Out, "compacted revision %d\n", revision)
			return nil
		}))
	cmd.Flags().Int64Var(&revision, "revision", 0, "revision to compact to (default: the current one)")
	return cmd
}
