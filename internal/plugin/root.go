// Package plugin is `kubectl etcd`: it assembles the commands, one package each beside the
// shared package cli (kubectl's flags, the Session that reaches a cluster's members through
// the API server's port-forward, output and completion).
package plugin

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/quorumkeeper/etcd-operator/internal/plugin/alarm"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/compact"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/convertcmd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/defrag"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/discarded"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/logs"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/members"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/migratecmd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/moveleader"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/recovercmd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/replace"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/replicas"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/report"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/restart"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/restorecmd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/snapshot"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/status"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/versioncmd"
	"github.com/quorumkeeper/etcd-operator/internal/version"
)

// NewRootCommand is `kubectl etcd` with every subcommand.
func NewRootCommand(out, errOut io.Writer) *cobra.Command {
	o := cli.NewOptions(out, errOut)
	root := &cobra.Command{
		Use:           "kubectl-etcd",
		Short:         "Inspect and operate the etcd clusters of etcd-operator",
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl etcd"},
		// --version, as Cozystack's plugin has it; `kubectl etcd version` says more.
		Version: version.Version,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	o.AddFlags(root)
	root.AddCommand(
		status.NewCmd(o), members.NewCmd(o), defrag.NewCmd(o), compact.NewCmd(o),
		alarm.NewCmd(o), moveleader.NewCmd(o), snapshot.NewCmd(o),
		replicas.NewPauseCmd(o), replicas.NewResumeCmd(o), replicas.NewAddMemberCmd(o), replicas.NewRemoveMemberCmd(o),
		replace.NewCmd(o), recovercmd.NewCmd(o), restorecmd.NewCmd(o), discarded.NewCmd(o), convertcmd.NewCmd(o), migratecmd.NewCmd(o),
		versioncmd.NewCmd(o), restart.NewCmd(o), logs.NewCmd(o), report.NewCmd(o),
	)
	return root
}

// The rows `-o json` prints, under the names they had in this package, for callers that
// decode them (the e2e tests do).
type (
	ClusterStatus   = status.ClusterStatus
	StatusRow       = status.StatusRow
	MemberRow       = members.MemberRow
	AlarmRow        = alarm.AlarmRow
	VersionInfo     = versioncmd.Info
	OperatorVersion = versioncmd.OperatorVersion
)
