// Package monitoring checks the alert rules of deploy/monitoring (which make chart-sync copies
// into the chart) with Prometheus' own promtool (PROMTOOL), which make test-chart unpacks from
// Debian's prometheus package: the rules load, and each alert fires where its unit tests say and stays
// quiet where they say, with the labels and annotations they render.
package monitoring

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	rulesFile = "../../deploy/monitoring/prometheus-rules.yaml"
	testsFile = "testdata/prometheus-rules.test.yaml"
)

func promtool(t *testing.T, args ...string) {
	t.Helper()
	bin := os.Getenv("PROMTOOL")
	if bin == "" {
		t.Fatal("PROMTOOL is not set: run through 'make test-chart', which provides promtool (hack/tool.sh promtool)")
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
}

func TestRulesLoad(t *testing.T) {
	promtool(t, "check", "rules", rulesFile)
}

func TestRulesUnitTests(t *testing.T) {
	promtool(t, "test", "rules", testsFile)
}

// Every alert has a test in which it fires and one in which it does not: an alert that cannot
// fire is as useless as one that always does.
func TestEveryAlertIsTested(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	read(t, rulesFile, &rules)
	read(t, testsFile, &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: a test that fires it %v, one that does not %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	for name := range fires {
		if !slices.Contains(alerts, name) {
			t.Errorf("the tests expect alert %s, which the rules do not define", name)
		}
	}
}

func read(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
