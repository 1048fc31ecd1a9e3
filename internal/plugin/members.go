package plugin

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
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

func newMembersCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:               "members CLUSTER",
		Short:             "etcd's member list: IDs, names, peer and client URLs, learners",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeClusterThenMember(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.connect(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			_, members, err := s.Etcd.MemberList(cmd.Context())
			if err != nil {
				return err
			}
			rows := memberRows(members)
			return o.print(rows, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tNAME\tSTATUS\tLEARNER\tPEER URLS\tCLIENT URLS")
				for _, r := range rows {
					state := "started"
					if !r.Started {
						state = "unstarted"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%t\t%s\t%s\n", r.ID, dash(r.Name), state, r.Learner, strings.Join(r.PeerURLs, ","), strings.Join(r.ClientURLs, ","))
				}
			})
		},
	}
}

func memberRows(members []etcd.Member) []MemberRow {
	rows := make([]MemberRow, 0, len(members))
	for _, m := range members {
		rows = append(rows, MemberRow{ID: m.IDHex(), Name: m.Name, Started: m.IsStarted(), Learner: m.IsLearner, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs})
	}
	return rows
}
