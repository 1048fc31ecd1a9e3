package main

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestInsideWindow(t *testing.T) {
	at := func(s string) *metav1.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Time{Time: tm}
	}
	window := func(from, to string) etcdv1.RestoreWindow {
		return etcdv1.RestoreWindow{Earliest: etcdv1.RestorePoint{Revision: 10, Time: at(from)}, Latest: etcdv1.RestorePoint{Revision: 90, Time: at(to)}}
	}
	first := func(int64) int64 { return 0 }
	for _, tc := range []struct {
		name     string
		w        etcdv1.RestoreWindow
		n        func(int64) int64
		want     string
		wantSpan int64
	}{
		{"the first whole second after the earliest", window("2026-12-02T10:00:00.400Z", "2026-12-02T10:00:05.200Z"), first, "2026-12-02T10:00:01Z", 5},
		{"the last is the latest's second", window("2026-12-02T10:00:00.400Z", "2026-12-02T10:00:05.200Z"), func(n int64) int64 { return n - 1 }, "2026-12-02T10:00:05Z", 5},
		{"an earliest on a whole second is not inside", window("2026-12-02T10:00:00Z", "2026-12-02T10:00:01Z"), first, "2026-12-02T10:00:01Z", 1},
		{"no whole second inside", window("2026-12-02T10:00:00.100Z", "2026-12-02T10:00:00.900Z"), first, "", 0},
		{"no time", etcdv1.RestoreWindow{}, first, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var span int64
			got, ok := insideWindow(tc.w, func(n int64) int64 { span = n; return tc.n(n) })
			if !ok {
				if tc.want != "" {
					t.Fatalf("no second inside, want %s", tc.want)
				}
				return
			}
			if tc.want == "" || got.UTC().Format(time.RFC3339) != tc.want || span != tc.wantSpan {
				t.Fatalf("got %s of %d seconds, want %q of %d", got.UTC().Format(time.RFC3339), span, tc.want, tc.wantSpan)
			}
		})
	}
}
