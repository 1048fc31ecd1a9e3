// Package cli is what every `kubectl etcd` command shares: kubectl's connection flags (from
// k8s.io/cli-runtime) and -o, the user's view of the API server (Kube), a Session that reaches
// a cluster's members through the API server's port-forward, output and completion helpers.
// Each command lives in its own package beside this one and takes an *Options.
package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Options are the flags every command shares: kubectl's connection flags and -o.
type Options struct {
	// Kubectl are kubectl's own flags: --kubeconfig, --context, -n, --as, --token,
	// --request-timeout and the rest, with kubectl's rules for combining them.
	Kubectl  *genericclioptions.ConfigFlags
	Output   string
	Out, Err io.Writer
}

// NewOptions are Options writing to out and errOut, with kubectl's flags at their defaults.
func NewOptions(out, errOut io.Writer) *Options {
	return &Options{Kubectl: genericclioptions.NewConfigFlags(true), Out: out, Err: errOut}
}

// AddFlags puts kubectl's flags and -o on root's persistent flags, and checks -o before any
// command runs.
func (o *Options) AddFlags(root *cobra.Command) {
	flags := root.PersistentFlags()
	o.Kubectl.AddFlags(flags)
	flags.StringVarP(&o.Output, "output", "o", "", "output format of commands that print objects: table (default), wide, json, yaml or name")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(OutputFormats, cobra.ShellCompDirectiveNoFileComp))
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return o.checkOutput() }
}

// OutputFormats are the values -o takes.
var OutputFormats = []string{"table", "wide", "json", "yaml", "name"}

func (o *Options) checkOutput() error {
	if o.Output == "" || slices.Contains(OutputFormats, o.Output) {
		return nil
	}
	return fmt.Errorf("--output %q: use one of %s, or leave it out for a table", o.Output, strings.Join(OutputFormats, ", "))
}

// Command is a subcommand whose first argument is a cluster (completed from the namespace)
// and whose next memberArgs arguments are members of it.
func (o *Options) Command(use, short string, args cobra.PositionalArgs, memberArgs int, run func(*cobra.Command, []string) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: args, ValidArgsFunction: o.CompleteClusterThenMember(memberArgs), RunE: run}
}

// WithSession connects to the cluster named by the first argument for the length of run.
func (o *Options) WithSession(run func(cmd *cobra.Command, s *Session, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		s, err := o.Connect(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		defer s.Close()
		return run(cmd, s, args)
	}
}

// WithCluster reads the cluster named by the first argument for run; no etcd connection.
func (o *Options) WithCluster(run func(ctx context.Context, k *Kube, c *etcdv1.EtcdCluster) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		k, err := o.Kube()
		if err != nil {
			return err
		}
		c, err := k.Cluster(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		return run(cmd.Context(), k, c)
	}
}

// Overridable passes a refusal through, or with force only warns about it.
func (o *Options) Overridable(refusal error, force bool) error {
	if refusal == nil {
		return nil
	}
	if !force {
		return fmt.Errorf("%w (--force does it anyway)", refusal)
	}
	Say(o.Err, "WARNING: %v; going ahead because of --force\n", refusal)
	return nil
}
