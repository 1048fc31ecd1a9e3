package replicas

import (
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
