package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const monitoringDir = "../../deploy/monitoring/"

// etcdMetrics are the members' metrics (etcd's own, on port 2381) that the dashboard and the
// alerts use, as etcd 3.5 and 3.6 name them.
var etcdMetrics = []string{
	"etcd_server_has_leader", "etcd_server_leader_changes_seen_total", "etcd_server_quota_backend_bytes",
	"etcd_mvcc_db_total_size_in_bytes", "etcd_mvcc_db_total_size_in_use_in_bytes",
	"etcd_disk_wal_fsync_duration_seconds", "etcd_disk_backend_commit_duration_seconds",
	"etcd_server_proposals_committed_total", "etcd_server_proposals_failed_total", "etcd_server_proposals_pending",
}

// otherMetrics come from controller-runtime and the Go client in the operator's process.
var otherMetrics = []string{"controller_runtime_reconcile_time_seconds", "process_resident_memory_bytes"}

var (
	metricName = regexp.MustCompile(`\b(etcd_[a-z_]+|controller_runtime_[a-z_]+|process_[a-z_]+)\b`)
	// labelLists are label matchers and by/on/without lists: their names are labels, not metrics.
	labelLists = regexp.MustCompile(`\{[^}]*\}|\b(by|on|without|ignoring|group_left|group_right)\s*\([^)]*\)`)
)

// metricNames lists the metric names an expression uses.
func metricNames(expr string) []string {
	return metricName.FindAllString(labelLists.ReplaceAllString(expr, ""), -1)
}

// checkNames fails on any metric an expression names that nothing exports: a typo there is
// an alert that never fires or a panel that stays empty.
func checkNames(t *testing.T, where, expr string) {
	t.Helper()
	known := slices.Concat(Names, etcdMetrics, otherMetrics)
	for _, name := range metricNames(expr) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			base = strings.TrimSuffix(base, suffix)
		}
		if !slices.Contains(known, base) && !slices.Contains(known, name) {
			t.Errorf("%s names metric %s, which nothing exports", where, name)
		}
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func TestAlertRules(t *testing.T) {
	data, err := os.ReadFile(monitoringDir + "prometheus-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleFile
	if err := yaml.UnmarshalStrict(data, &rules); err != nil {
		t.Fatalf("prometheus-rules.yaml: %v", err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" {
				t.Errorf("group %s: a rule without alert name or expr: %+v", g.Name, r)
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a severity, summary or description", r.Alert)
			}
			checkNames(t, "alert "+r.Alert, r.Expr)
		}
	}
	for _, want := range []string{
		"EtcdNoLeader", "EtcdQuorumAtRisk", "EtcdDatabaseNearQuota", "EtcdMemberDown", "EtcdSnapshotsFailing",
		// issue 21: the operator down, backups too old or never taken, certificates expiring
		"EtcdOperatorDown", "EtcdSnapshotTooOld", "EtcdSnapshotNeverSucceeded", "EtcdCertificateExpiresSoon", "EtcdVolumeNearFull",
	} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s; alerts: %v", want, alerts)
		}
	}
}

func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile(monitoringDir + "grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatal("the dashboard has no title or no panels")
	}
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			if strings.TrimSpace(target.Expr) == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
			checkNames(t, "panel "+p.Title, target.Expr)
			for _, name := range metricNames(target.Expr) {
				used[name] = true
			}
		}
	}
	// The issue asks for these on the dashboard: health, leader changes, DB size vs quota,
	// fsync and commit latency, proposals, and the operator's own metrics.
	for _, want := range []string{
		"etcd_server_leader_changes_seen_total", "etcd_server_quota_backend_bytes", "etcd_disk_wal_fsync_duration_seconds_bucket",
		"etcd_disk_backend_commit_duration_seconds_bucket", "etcd_server_proposals_committed_total",
		MembersName, MembershipChangesName, ReconcileErrorsName, ClusterInfoName,
		// and what the alerts of issue 21 watch: leaders, the quota, the operator's builds,
		// phases, backups' age and schedules, certificates
		"etcd_server_has_leader", "etcd_mvcc_db_total_size_in_bytes", BuildInfoName, ClusterPhaseName,
		SnapshotLastSuccessName, ScheduleCreatedName, SnapshotsName, CertificateExpiryName,
	} {
		if !used[want] {
			t.Errorf("the dashboard shows no %s", want)
		}
	}
}
