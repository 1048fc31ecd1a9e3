package status

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spf13/cobra"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// StatusRow is one member as `kubectl etcd status` shows it.
type StatusRow struct {
	Name        string   `json:"name"`
	MemberID    string   `json:"memberID,omitempty"`
	Endpoint    string   `json:"endpoint"`
	Version     string   `json:"version,omitempty"`
	DBSize      int64    `json:"dbSize"`
	DBSizeInUse int64    `json:"dbSizeInUse"`
	Leader      bool     `json:"leader"`
	RaftTerm    uint64   `json:"raftTerm"`
	RaftIndex   uint64   `json:"raftIndex"`
	Learner     bool     `json:"learner"`
	Alarms      []string `json:"alarms,omitempty"`
	Pod         string   `json:"pod,omitempty"`
	Node        string   `json:"node,omitempty"`
	PodIP       string   `json:"podIP,omitempty"`
	Restarts    int32    `json:"restarts"`
	Ready       bool     `json:"ready"`
	Error       string   `json:"error,omitempty"`
}

// ClusterStatus is the whole answer of `kubectl etcd status`.
type ClusterStatus struct {
	Cluster    string             `json:"cluster"`
	Namespace  string             `json:"namespace"`
	Members    []StatusRow        `json:"members"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NewCmd is `kubectl etcd status`.
func NewCmd(o *cli.Options) *cobra.Command {
	return o.Command("status CLUSTER",
		"One table of every member (ID, version, DB size, leader, raft, alarms, Pod) and the cluster's conditions",
		cobra.ExactArgs(1), 0, o.WithSession(func(cmd *cobra.Command, s *cli.Session, _ []string) error {
			st, err := Of(cmd.Context(), s)
			if err != nil {
				return err
			}
			return o.Print(Printout(st))
		}))
}

// Printout is the status for -o: the table (wide adds each Pod's IP and restarts), JSON or
// YAML of the whole answer, or the members' names.
func Printout(st ClusterStatus) cli.Printout {
	names := make([]string, 0, len(st.Members))
	for _, r := range st.Members {
		names = append(names, r.Name)
	}
	return cli.Printout{Value: st, Table: func(w *tabwriter.Writer, wide bool) { writeStatus(w, st, wide) },
		Names: cli.Named(cli.ResourceEtcdMember, names...)}
}

// Of is the status of the session's cluster: each member's own answer joined with the
// operator's view, as `kubectl etcd status` prints it (the report bundles it too).
func Of(ctx context.Context, s *cli.Session) (ClusterStatus, error) {
	alarms, err := s.Etcd.Alarms(ctx)
	if err != nil {
		return ClusterStatus{}, fmt.Errorf("alarm list: %w", err)
	}
	rows := statusRows(s.Cluster, s.Members, s.Pods, s.Statuses(ctx), alarms)
	return ClusterStatus{Cluster: s.Cluster.Name, Namespace: s.Cluster.Namespace, Members: rows, Conditions: s.Cluster.Status.Conditions}, nil
}

// statusRows joins the operator's view (EtcdMembers, Pods) with each member's own answer.
func statusRows(c *etcdv1.EtcdCluster, members []etcdv1.EtcdMember, pods map[string]corev1.Pod,
	answers map[string]cli.MemberStatus, alarms []etcd.Alarm) []StatusRow {
	rows := make([]StatusRow, 0, len(members))
	for _, m := range members {
		row := StatusRow{Name: m.Name, MemberID: m.Status.MemberID, Endpoint: specs.ClientURL(c, m.Name)}
		if p, ok := pods[m.Name]; ok {
			row.Pod, row.Node, row.PodIP, row.Ready = p.Name, p.Spec.NodeName, p.Status.PodIP, cli.PodReady(p)
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == specs.ContainerName {
					row.Restarts = cs.RestartCount
				}
			}
		}
		if a, ok := answers[m.Name]; ok && a.Err == nil {
			st := a.Status
			row.MemberID = etcd.FormatID(st.MemberID)
			row.Version, row.DBSize, row.DBSizeInUse = st.Version, st.DBSize, st.DBSizeInUse
			row.Leader = st.Leader != 0 && st.Leader == st.MemberID
			row.RaftTerm, row.RaftIndex, row.Learner = st.RaftTerm, st.RaftIndex, st.IsLearner
			for _, al := range alarms {
				if al.MemberID == st.MemberID {
					row.Alarms = append(row.Alarms, al.Type)
				}
			}
		} else if ok {
			row.Error = a.Err.Error()
		} else {
			row.Error = "no running Pod"
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows
}

func writeStatus(w *tabwriter.Writer, st ClusterStatus, wide bool) {
	extraHead, extra := "", func(StatusRow) string { return "" }
	if wide {
		extraHead = "\tPOD IP\tRESTARTS"
		extra = func(r StatusRow) string { return fmt.Sprintf("\t%s\t%d", cli.Dash(r.PodIP), r.Restarts) }
	}
	cli.Row(w, "NAME\tMEMBER ID\tENDPOINT\tVERSION\tDB SIZE\tIN USE\tLEADER\tRAFT TERM\tRAFT INDEX\tLEARNER\tALARMS\tPOD\tNODE\tREADY%s\n", extraHead)
	for _, r := range st.Members {
		alarms := strings.Join(r.Alarms, ",")
		if alarms == "" {
			alarms = "-"
		}
		if r.Error != "" {
			cli.Row(w, "%s\t%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\t%s\t%s\t%t%s\n", r.Name, cli.Dash(r.MemberID), r.Endpoint, "error: "+r.Error, cli.Dash(r.Pod), cli.Dash(r.Node), r.Ready, extra(r))
			continue
		}
		cli.Row(w, "%s\t%s\t%s\t%s\t%s\t%s\t%t\t%d\t%d\t%t\t%s\t%s\t%s\t%t%s\n", r.Name, r.MemberID, r.Endpoint, r.Version,
			cli.HumanBytes(r.DBSize), cli.HumanBytes(r.DBSizeInUse), r.Leader, r.RaftTerm, r.RaftIndex, r.Learner, alarms, cli.Dash(r.Pod), cli.Dash(r.Node), r.Ready, extra(r))
	}
	_ = w.Flush()
	if len(st.Conditions) > 0 {
		cli.Row(w, "\n")
		cli.Row(w, "CONDITION\tSTATUS\tREASON\tMESSAGE\n")
		for _, c := range st.Conditions {
			cli.Row(w, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
}
