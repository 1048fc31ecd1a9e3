package replace

import "testing"

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
