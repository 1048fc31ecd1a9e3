package plugin

import (
	"slices"
	"strings"
	"testing"
)

func TestCheckScale(t *testing.T) {
	for _, tc := range []struct {
		current, target, ready int
		refuse                 string
	}{
		{3, 4, 3, ""},
		{3, 2, 3, ""},
		{5, 4, 5, ""},
		{3, 2, 2, "below the quorum of 2"},
		{5, 4, 3, "below the quorum of 3"},
		{3, 4, 2, "heal the cluster first"},
		{1, 2, 1, "heal the cluster first"},
		{1, 0, 1, "kubectl etcd pause"},
		{2, 1, 1, "below the quorum of 1"},
		{2, 1, 2, ""},
	} {
		err := checkScale(tc.current, tc.target, tc.ready)
		if tc.refuse == "" && err != nil || tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)) {
			t.Errorf("checkScale(%d -> %d, %d ready) = %v; want %q", tc.current, tc.target, tc.ready, err, tc.refuse)
		}
	}
}

func TestCheckReplace(t *testing.T) {
	for _, tc := range []struct {
		voters, ready int
		memberReady   bool
		ok            bool
	}{
		{3, 3, true, true},
		{3, 2, false, true},
		{3, 2, true, false},
		{1, 1, true, false},
		{5, 4, true, true},
		{5, 3, true, false},
	} {
		if err := checkReplace(tc.voters, tc.ready, tc.memberReady); (err == nil) != tc.ok {
			t.Errorf("checkReplace(%d voters, %d ready, member ready %t) = %v; want ok %t", tc.voters, tc.ready, tc.memberReady, err, tc.ok)
		}
	}
}

func TestDefragOrderPutsTheLeaderLast(t *testing.T) {
	got := defragOrder([]string{"db-3", "db-1", "db-2"}, "db-1")
	if !slices.Equal(got, []string{"db-2", "db-3", "db-1"}) {
		t.Errorf("order %v", got)
	}
	if got := defragOrder([]string{"db-2", "db-1"}, ""); !slices.Equal(got, []string{"db-1", "db-2"}) {
		t.Errorf("order without a leader %v", got)
	}
}

func TestResumeReplicas(t *testing.T) {
	if n, err := resumeReplicas("5", 3); n != 5 || err != nil {
		t.Errorf("recorded 5: %d %v", n, err)
	}
	if n, err := resumeReplicas("", 3); n != 3 || err != nil {
		t.Errorf("nothing recorded: %d %v", n, err)
	}
	for _, bad := range []string{"0", "x", "-2"} {
		if _, err := resumeReplicas(bad, 3); err == nil {
			t.Errorf("recorded %q accepted", bad)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for in, want := range map[int64]string{0: "0 B", 1023: "1023 B", 20480: "20.0 KiB", 3 << 20: "3.0 MiB"} {
		if got := humanBytes(in); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", in, got, want)
		}
	}
}
