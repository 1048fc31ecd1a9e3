package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// -versus names a known operator, with a version for the report or without; anything else is
// refused before the cluster is touched.
func TestParseRival(t *testing.T) {
	cases := []struct {
		in      string
		want    rival
		wantErr string
	}{
		{"cozystack", rival{name: cozystack}, ""},
		{"cozystack@v0.5.4", rival{name: cozystack, version: "v0.5.4"}, ""},
		{"aenix@v0.4.5", rival{}, `no operator "aenix"`},
		{"cozystack@", rival{}, "no version after @"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseRival(tc.in)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("parseRival(%q) = %v, want an error saying %q", tc.in, err, tc.wantErr)
			case tc.wantErr == "" && (err != nil || got != tc.want):
				t.Fatalf("parseRival(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

// The bench cannot swap the operators by itself: -versus without the command is refused.
func TestVersusNeedsTheSwitchCommand(t *testing.T) {
	var o options
	if err := o.parse("", "cozystack", ""); err == nil || !strings.Contains(err.Error(), "-switch-operator") {
		t.Fatalf("parse without -switch-operator = %v, want it refused", err)
	}
	o.switchOperator = "hack/cozystack-side-by-side.sh switch"
	if err := o.parse("", "cozystack@v0.5.4", ""); err != nil || o.versus.version != "v0.5.4" {
		t.Fatalf("parse with -switch-operator = %v (%+v), want cozystack@v0.5.4", err, o.versus)
	}
}

// The switch command gets the side as its last word.
func TestSwitchArgs(t *testing.T) {
	got, err := switchArgs("  hack/cozystack-side-by-side.sh   switch ", cozystack)
	if want := []string{"hack/cozystack-side-by-side.sh", "switch", cozystack}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("switchArgs = %q, %v; want %q", got, err, want)
	}
	if _, err := switchArgs(" ", ours); err == nil {
		t.Fatal("an empty command was accepted")
	}
}

// The stopwatch stops only when etcd lists exactly n members, all voters that started.
func TestAllVoters(t *testing.T) {
	voter := func(id uint64) etcd.Member { return etcd.Member{ID: id, Name: "etcd-x"} }
	cases := []struct {
		name    string
		list    []etcd.Member
		wantErr string
	}{
		{"three voters", []etcd.Member{voter(1), voter(2), voter(3)}, ""},
		{"one short", []etcd.Member{voter(1), voter(2)}, "lists 2 members, want 3"},
		{"one too many", []etcd.Member{voter(1), voter(2), voter(3), voter(4)}, "lists 4 members, want 3"},
		{"a learner", []etcd.Member{voter(1), voter(2), {ID: 0xab, Name: "etcd-y", IsLearner: true}}, "ab is a learner"},
		{"added, not started", []etcd.Member{voter(1), voter(2), {ID: 0xcd}}, "cd has not started"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := allVoters(tc.list, 3)
			if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("allVoters = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// Cozystack's EtcdCluster is sent as its README writes it, and grown by spec.replicas alone.
func TestCozystackManifest(t *testing.T) {
	got, err := json.Marshal(cozystackManifest("bench-cozystack-x", 3, "3.6.16"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"etcd-operator.cozystack.io/v1alpha2","kind":"EtcdCluster","metadata":{"name":"etcd","namespace":"bench-cozystack-x"},` +
		`"spec":{"replicas":3,"storage":{"size":"1Gi"},"version":"3.6.16"}}`
	if string(got) != want {
		t.Fatalf("manifest\n%s\nwant\n%s", got, want)
	}
	if got, want := string(replicasPatch(5)), `{"spec":{"replicas":5}}`; got != want {
		t.Fatalf("replicasPatch(5) = %s, want %s", got, want)
	}
}

// A step that failed is said, the steps after it on the same cluster are said to be left out,
// and a side without a time shows "-" rather than a time or ratio made of nothing.
func TestVersusReport(t *testing.T) {
	s := func(secs ...float64) []time.Duration {
		var ds []time.Duration
		for _, x := range secs {
			ds = append(ds, time.Duration(x*float64(time.Second)))
		}
		return ds
	}
	times := newSamples()
	for _, st := range versusSteps {
		times.declare(st.metric)
	}
	for _, d := range s(3, 4, 3.5) {
		times.add("bootstrap, 3 members", ours, d)
		times.add("scale-out 3 -> 5", ours, d)
	}
	for _, d := range s(7, 8, 6) {
		times.add("bootstrap, 3 members", cozystack, d)
	}
	failed := &failures{}
	failed.add(cozystack, 1, versusSteps[1:], errors.New("timed out"))
	o := options{runs: 3, versus: rival{name: cozystack, version: "v0.5.4"}}
	report := formatVersus(o, times, *failed, time.Minute)
	for _, want := range []string{
		"ours beside Cozystack's etcd-operator (github.com/cozystack/etcd-operator) v0.5.4;",
		"metric\tcozystack\tours\tcozystack/ours\tspread (max-min)\tcozystack runs (s)\tours runs (s)\n",
		"bootstrap, 3 members\t7.00s\t3.50s\t2.00\t2.0s / 1.0s\t7.0 8.0 6.0\t3.0 4.0 3.5\n",
		"Pod loss, 3 members\t-\t-\t-\t- / -\t-\t-\n",
		"scale-out 3 -> 5\t-\t3.50s\t-\t- / 1.0s\t-\t3.0 4.0 3.5\n",
		"  cozystack, Pod loss, 3 members, run 2\ttimed out\n",
		"  cozystack, scale-out 3 -> 5, run 2\tleft out: it continues from Pod loss, 3 members\n",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// A step starts from a cluster at rest: every Pod Ready since before the cut, none unready.
func TestReadyLongEnough(t *testing.T) {
	cut := time.Date(2026, 12, 5, 3, 0, 10, 0, time.UTC)
	pod := func(name string, status corev1.ConditionStatus, at time.Time) corev1.Pod {
		p := corev1.Pod{}
		p.Name = name
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(at)}}
		return p
	}
	early, late := cut.Add(-time.Second), cut
	cases := []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"every Pod ready long enough", []corev1.Pod{pod("db-1", corev1.ConditionTrue, early), pod("db-2", corev1.ConditionTrue, early)}, ""},
		{"one ready only since the cut", []corev1.Pod{pod("db-1", corev1.ConditionTrue, early), pod("db-2", corev1.ConditionTrue, late)}, "pod db-2 has been ready only since"},
		{"one not ready", []corev1.Pod{pod("db-1", corev1.ConditionFalse, early)}, "pod db-1 is not ready"},
		{"one without a Ready condition", []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "db-3"}}}, "pod db-3 is not ready"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := readyLongEnough(tc.pods, cut)
			if got := fmt.Sprint(err); (tc.want == "") != (err == nil) || !strings.Contains(got, tc.want) {
				t.Fatalf("readyLongEnough = %v, want %q", err, tc.want)
			}
		})
	}
}
