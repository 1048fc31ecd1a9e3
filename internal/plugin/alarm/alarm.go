package alarm

import (
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// AlarmRow is one raised alarm.
type AlarmRow struct {
	MemberID string `json:"memberID"`
	Alarm    string `json:"alarm"`
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
			rows := alarmRows(alarms)
			return o.Print(rows, func(w *tabwriter.Writer) {
				cli.Row(w, "MEMBER ID\tALARM\n")
				for _, r := range rows {
					cli.Row(w, "%s\t%s\n", r.MemberID, r.Alarm)
				}
			})
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

func alarmRows(alarms []etcd.Alarm) []AlarmRow {
	rows := make([]AlarmRow, 0, len(alarms))
	for _, a := range alarms {
		rows = append(rows, AlarmRow{MemberID: etcd.FormatID(a.MemberID), Alarm: a.Type})
	}
	return rows
}
