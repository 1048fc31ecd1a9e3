package archive

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func seg(first, last, until int64) Meta {
	s := Segment{First: first, Last: last, Until: time.UnixMilli(until * 1000).UTC()}
	return MetaOf("p", s)
}

func names(ms []Meta) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func TestNamesSortByRevisionAndReadBack(t *testing.T) {
	in := []Meta{seg(11, 20, 30), seg(1, 10, 10), seg(11, 10, 20), seg(21, 25, 40)}
	got := ParseNames(append(names(in), "p/segments/notes.txt", "p/nightly.db", "p/segments/x-1-2.seg", "p/segments/5-3-1.seg"))
	want := []Meta{in[1], in[2], in[0], in[3]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed %+v\nwant %+v", got, want)
	}
	if got[0].Name != "p/segments/00000000000000000001-00000000000000000010-00000000000000010000.seg" {
		t.Errorf("name %s", got[0].Name)
	}
	if Resume(got) != 26 || Resume(nil) != 0 {
		t.Errorf("resume at %d, %d", Resume(got), Resume(nil))
	}
}

func TestNewestChainStartsAfterTheLastGap(t *testing.T) {
	for name, tc := range map[string]struct {
		in   []Meta
		want Chain
	}{
		"unbroken":                {[]Meta{seg(1, 10, 10), seg(11, 10, 20), seg(11, 20, 30)}, Chain{1, 20, time.Unix(30, 0).UTC()}},
		"a gap":                   {[]Meta{seg(1, 10, 10), seg(15, 20, 30), seg(21, 22, 35)}, Chain{15, 22, time.Unix(35, 0).UTC()}},
		"two gaps":                {[]Meta{seg(1, 10, 10), seg(15, 20, 30), seg(30, 40, 50)}, Chain{30, 40, time.Unix(50, 0).UTC()}},
		"an empty segment at one": {[]Meta{seg(1, 0, 5)}, Chain{1, 0, time.Unix(5, 0).UTC()}},
	} {
		got, ok := NewestChain(tc.in)
		if !ok || got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
	if _, ok := NewestChain(nil); ok {
		t.Error("a chain without segments")
	}
}

func TestNewestGapIsTheOneBeforeTheNewestChain(t *testing.T) {
	for name, tc := range map[string]struct {
		in   []Meta
		want *Gap
	}{
		"unbroken": {[]Meta{seg(1, 10, 10), seg(11, 10, 20), seg(11, 20, 30)}, nil},
		"a gap":    {[]Meta{seg(1, 10, 10), seg(15, 14, 30), seg(15, 22, 35)}, &Gap{From: 11, To: 14, Time: time.Unix(30, 0).UTC()}},
		"two gaps": {[]Meta{seg(1, 10, 10), seg(15, 20, 30), seg(30, 40, 50)}, &Gap{From: 21, To: 29, Time: time.Unix(50, 0).UTC()}},
		"none":     {nil, nil},
	} {
		got := NewestGap(tc.in)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}

func TestPlanTakesExactlyTheSegmentsToTheTarget(t *testing.T) {
	all := []Meta{seg(1, 10, 10), seg(11, 20, 20), seg(21, 20, 30), seg(21, 30, 40), seg(40, 50, 60), seg(51, 60, 70)}
	for name, tc := range map[string]struct {
		base   int64
		target Target
		want   []Meta
		err    error
	}{
		"revision inside the second":          {base: 12, target: Target{Revision: 15}, want: all[1:2]},
		"revision at a segment's end":         {base: 5, target: Target{Revision: 20}, want: all[0:2]},
		"revision in the snapshot already":    {base: 15, target: Target{Revision: 15}},
		"snapshot at a segment's end":         {base: 20, target: Target{Revision: 25}, want: all[2:4]},
		"time up to the first segment closed": {base: 5, target: Target{Time: time.Unix(25, 0)}, want: all[0:3]},
		"time at a closing time":              {base: 5, target: Target{Time: time.Unix(20, 0)}, want: all[0:2]},
		"across the gap":                      {base: 25, target: Target{Revision: 45}, err: ErrGap},
		"after the gap":                       {base: 45, target: Target{Revision: 55}, want: all[4:6]},
		"beyond the archive, revision":        {base: 45, target: Target{Revision: 61}, err: ErrBeyond},
		"beyond the archive, time":            {base: 45, target: Target{Time: time.Unix(71, 0)}, err: ErrBeyond},
		"snapshot older than the archive":     {base: 0, target: Target{Revision: 5}, want: all[0:1]},
		"snapshot before a later chain":       {base: 35, target: Target{Revision: 45}, err: ErrGap},
	} {
		got, err := Plan(all, tc.base, tc.target)
		if !errors.Is(err, tc.err) || tc.err == nil && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v %v\nwant %v %v", name, names(got), err, names(tc.want), tc.err)
		}
	}
}

func TestPrunableKeepsWhatTheOldestSnapshotNeeds(t *testing.T) {
	all := []Meta{seg(1, 10, 10), seg(11, 20, 20), seg(21, 20, 30), seg(21, 30, 40)}
	if got := Prunable(all, 20); !reflect.DeepEqual(got, all[:1]) {
		t.Errorf("pruned %v", names(got))
	}
	if got := Prunable(all, 0); got != nil {
		t.Errorf("pruned %v without a snapshot", names(got))
	}
	// An archive behind every kept snapshot keeps its newest segments all the same.
	if got := Prunable(all, 100); !reflect.DeepEqual(got, all[:3]) {
		t.Errorf("pruned %v of an archive behind the oldest snapshot; want all but the newest", names(got))
	}
}
