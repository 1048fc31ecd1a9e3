package etcdload

import "testing"

func TestMissing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		acked  []string
		stored map[string]bool
		want   string
	}{
		{"all stored", []string{"p/1", "p/2"}, map[string]bool{"p/1": true, "p/2": true, "p/3": true}, ""},
		{"one lost", []string{"p/1", "p/2"}, map[string]bool{"p/1": true}, "p/2"},
		{"wrong value", []string{"p/1"}, map[string]bool{"p/1": false}, "p/1"},
		{"nothing acked", nil, nil, ""},
	} {
		if got := Missing(tc.acked, tc.stored); got != tc.want {
			t.Errorf("%s: Missing = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestAccessScheme(t *testing.T) {
	if (Access{}).Scheme() != "http" {
		t.Error("plaintext access is not http")
	}
}
