package alarm

import (
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// AlarmRow is one raised alarm.
type AlarmRow struct {
	MemberID string `json:"memberID"`
	// Member is the member's name in etcd's member list ("" when etcd no longer lists it).
	Member string `json:"member,omitempty"`
	Alarm  string `json:"alarm"`
}

// NewCmd is `kubectl etcd alarm list|disarm`.
func NewCmd(o *cli.Options) *cobra.Command {
	cmd := &cobra.Command{Use: "alarm", Short: "List or disarm etcd's alarms (NOSPACE, CORRUPT)"}
	list := o.Command("list CLUSTER", "List the alarms raised in the cluster", cobra.ExactArgs(1), 0,
		o.WithSession(func(cmd *cobra.Command, s *cli.Session, _ []string) error {
			alarms, err := s.Etcd.Alarms(cmd.Context())
			if err != nil {
				return err
			}
			_, members, err := s.Etcd.MemberList(cmd.Context())
			if err != nil {
				return err
			}
			return o.Print(alarmPrintout(alarmRows(alarms, members)))
		}))
	disarm := o.Command("disarm CLUSTER", "Disarm every alarm (after freeing space: compact and defrag first)", cobra.ExactArgs(1), 0,
		o.WithSession(func(cmd *cobra.Command, s *cli.Session, _ []string) error {
			alarms, err := s.Etcd.Alarms(cmd.Context())
			if err != nil {
				return err
			}
			for _, a := range alarms {
				if err := s.Etcd.DisarmAlarm(cmd.Context(), a); err != nil {
					return err
				}
				cli.Say(o.Out, "disarmed %s of member %s\n", a.Type, etcd.FormatID(a.MemberID))
			}
			if len(alarms) == 0 {
				cli.Say(o.Out, "no alarm raised\n")
			}
			return nil
		}))
	cmd.AddCommand(list, disarm)
	return cmd
}

// alarmRows are the raised alarms, each with the name etcd lists its member under.
func alarmRows(alarms []etcd.Alarm, members []etcd.Member) []AlarmRow {
	names := make(map[uint64]string, len(members))
	for _, m := range members {
		names[m.ID] = m.Name
	}
	rows := make([]AlarmRow, 0, len(alarms))
	for _, a := range alarms {
		rows = append(rows, AlarmRow{MemberID: etcd.FormatID(a.MemberID), Member: names[a.MemberID], Alarm: a.Type})
	}
	return rows
}

// alarmPrintout is the alarms for -o: the table (no extra columns for wide), JSON or YAML of
// the rows, or the names of the members with an alarm, each once.
func alarmPrintout(rows []AlarmRow) cli.Printout {
	var names []string
	for _, r := range rows {
		if r.Member != "" && !slices.Contains(names, r.Member) {
			names = append(names, r.Member)
		}
	}
	return cli.Printout{Value: rows, Names: cli.Named(cli.ResourceEtcdMember, names...), Table: func(w *tabwriter.Writer, _ bool) {
		cli.Row(w, "MEMBER ID\tMEMBER\tALARM\n")
		for _, r := range rows {
			cli.Row(w, "%s\t%s\t%s\n", r.MemberID, cli.Dash(r.Member), r.Alarm)
		}
	}}
}
