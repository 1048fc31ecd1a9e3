package members

import (
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// MemberRow is one entry of etcd's member list.
type MemberRow struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Started    bool     `json:"started"`
	Learner    bool     `json:"learner"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
}

// NewCmd is `kubectl etcd members`.
func NewCmd(o *cli.Options) *cobra.Command {
	return o.Command("members CLUSTER", "etcd's member list: IDs, names, peer and client URLs, learners",
		cobra.ExactArgs(1), 0, o.WithSession(func(cmd *cobra.Command, s *cli.Session, _ []string) error {
			_, members, err := s.Etcd.MemberList(cmd.Context())
			if err != nil {
				return err
			}
			return o.Print(printout(Rows(members)))
		}))
}

// Rows are etcd's member list as the command prints it.
func Rows(members []etcd.Member) []MemberRow {
	rows := make([]MemberRow, 0, len(members))
	for _, m := range members {
		rows = append(rows, MemberRow{ID: m.IDHex(), Name: m.Name, Started: m.IsStarted(), Learner: m.IsLearner, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs})
	}
	return rows
}

// printout is etcd's member list for -o: the table (it has no extra columns for wide), JSON
// or YAML of the rows, or the members' names (a member added but not started has none yet).
func printout(rows []MemberRow) cli.Printout {
	var names []string
	for _, r := range rows {
		if r.Name != "" {
			names = append(names, r.Name)
		}
	}
	return cli.Printout{Value: rows, Names: cli.Named(cli.ResourceEtcdMember, names...), Table: func(w *tabwriter.Writer, _ bool) {
		cli.Row(w, "ID\tNAME\tSTATUS\tLEARNER\tPEER URLS\tCLIENT URLS\n")
		for _, r := range rows {
			state := "started"
			if !r.Started {
				state = "unstarted"
			}
			cli.Row(w, "%s\t%s\t%s\t%t\t%s\t%s\n", r.ID, cli.Dash(r.Name), state, r.Learner, strings.Join(r.PeerURLs, ","), strings.Join(r.ClientURLs, ","))
		}
	}}
}
