package convertcmd

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/convert"
)

// NewCmd is `kubectl etcd convert`.
func NewCmd(o *cli.Options) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "convert -f FILE",
		Short: "Print an operator.etcd.io or etcd.aenix.io EtcdCluster manifest as this operator's, with notes on what does not carry over",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("name the manifest with -f FILE (- reads standard input)")
			}
			in := cmd.InOrStdin()
			if file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer func() { _ = f.Close() }()
				in = f
			}
			results, err := convert.Manifests(in)
			if err != nil {
				return err
			}
			out, err := convert.YAML(results)
			if err != nil {
				return err
			}
			_, err = o.Out.Write(out)
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "manifest to convert (- for standard input)")
	return cmd
}
