// Package plugin is `kubectl etcd`: one file per command, a Session that reaches a cluster's
// members through the API server's port-forward, and pure decisions with table tests.
package plugin

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
)

// Options are the flags every command shares: kubectl's connection flags and -o.
type Options struct {
	loading   *clientcmd.ClientConfigLoadingRules
	overrides *clientcmd.ConfigOverrides
	Output    string
	Out, Err  io.Writer
}

// NewRootCommand is `kubectl etcd` with every subcommand.
func NewRootCommand(out, errOut io.Writer) *cobra.Command {
	o := &Options{
		loading:   clientcmd.NewDefaultClientConfigLoadingRules(),
		overrides: &clientcmd.ConfigOverrides{},
		Out:       out, Err: errOut,
	}
	root := &cobra.Command{
		Use:           "kubectl-etcd",
		Short:         "Inspect and operate the etcd clusters of etcd-operator",
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl etcd"},
	}
	root.SetOut(out)
	root.SetErr(errOut)
	flags := root.PersistentFlags()
	flags.StringVar(&o.loading.ExplicitPath, "kubeconfig", "", "path of the kubeconfig file")
	flags.StringVar(&o.overrides.CurrentContext, "context", "", "kubeconfig context to use")
	flags.StringVarP(&o.overrides.Context.Namespace, "namespace", "n", "", "namespace of the cluster")
	flags.StringVarP(&o.Output, "output", "o", "", "output format: table (default), json or yaml")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		switch o.Output {
		case "", "table", "json", "yaml":
			return nil
		}
		return fmt.Errorf("--output %q: use json, yaml or leave it out for a table", o.Output)
	}
	root.AddCommand(
		newStatusCommand(o), newMembersCommand(o), newDefragCommand(o), newCompactCommand(o),
		newAlarmCommand(o), newMoveLeaderCommand(o), newSnapshotCommand(o),
		newPauseCommand(o), newResumeCommand(o), newAddMemberCommand(o), newRemoveMemberCommand(o),
		newReplaceMemberCommand(o), newRecoverCommand(o), newDiscardedCommand(o), newConvertCommand(o), newMigrateCommand(o),
	)
	return root
}

// command is a subcommand whose first argument is a cluster (completed from the namespace)
// and whose next memberArgs arguments are members of it.
func (o *Options) command(use, short string, args cobra.PositionalArgs, memberArgs int, run func(*cobra.Command, []string) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: args, ValidArgsFunction: o.completeClusterThenMember(memberArgs), RunE: run}
}

// withSession connects to the cluster named by the first argument for the length of run.
func (o *Options) withSession(run func(cmd *cobra.Command, s *Session, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		s, err := o.connect(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		defer s.Close()
		return run(cmd, s, args)
	}
}
