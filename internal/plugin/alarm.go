package plugin

import (
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// AlarmRow is one raised alarm.
type AlarmRow struct {
	MemberID string `json:"memberID"`
	Alarm    string `json:"alarm"`
}

func newAlarmCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{Use: "alarm", Short: "List or disarm etcd's alarms (NOSPACE, CORRUPT)"}
	list := o.command("list CLUSTER", "List the alarms raised in the cluster", cobra.ExactArgs(1), 0,
		o.withSession(func(cmd *cobra.Command, s *Session, _ []string) error {
			alarms, err := s.Etcd.Alarms(cmd.Context())
			if err != nil {
				return err
			}
			rows := alarmRows(alarms)
			return o.print(rows, func(w *tabwriter.Writer) {
				row(w, "MEMBER ID\tALARM\n")
				for _, r := range rows {
					row(w, "%s\t%s\n", r.MemberID, r.Alarm)
				}
			})
		}))
	disarm := o.command("disarm CLUSTER", "Disarm every alarm (after freeing space: compact and defrag first)", cobra.ExactArgs(1), 0,
		o.withSession(func(cmd *cobra.Command, s *Session, _ []string) error {
			alarms, err := s.Etcd.Alarms(cmd.Context())
			if err != nil {
				return err
			}
			for _, a := range alarms {
				if err := s.Etcd.DisarmAlarm(cmd.Context(), a); err != nil {
					return err
				}
				say(o.Out, "disarmed %s of member %s\n", a.Type, etcd.FormatID(a.MemberID))
			}
			if len(alarms) == 0 {
				say(o.Out, "no alarm raised\n")
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
