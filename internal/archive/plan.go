package archive

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SegmentsDir is the directory, under the archive's prefix, the segments are stored in.
const SegmentsDir = "segments"

// segmentSuffix ends every segment's name.
const segmentSuffix = ".seg"

// Meta is what a segment's name says of it: its revisions and its closing time, enough to
// plan a restore or prune without reading it.
type Meta struct {
	Name        string
	First, Last int64
	Until       time.Time
}

// SegmentName is where segment s is stored under prefix: its first and last revisions and its
// closing time (Unix milliseconds), zero-padded so that names sort by revision.
func SegmentName(prefix string, s Segment) string {
	return path.Join(prefix, SegmentsDir, fmt.Sprintf("%020d-%020d-%020d%s", s.First, s.Last, s.Until.UnixMilli(), segmentSuffix))
}

// MetaOf is the segment's Meta.
func MetaOf(prefix string, s Segment) Meta {
	return Meta{Name: SegmentName(prefix, s), First: s.First, Last: s.Last, Until: time.UnixMilli(s.Until.UnixMilli()).UTC()}
}

// ParseName reads a name SegmentName wrote; ok is false for any other file.
func ParseName(name string) (Meta, bool) {
	base, ok := strings.CutSuffix(path.Base(name), segmentSuffix)
	if !ok {
		return Meta{}, false
	}
	parts := strings.Split(base, "-")
	if len(parts) != 3 {
		return Meta{}, false
	}
	var n [3]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil || v < 0 {
			return Meta{}, false
		}
		n[i] = v
	}
	if n[0] < 1 || n[1] < n[0]-1 {
		return Meta{}, false
	}
	return Meta{Name: name, First: n[0], Last: n[1], Until: time.UnixMilli(n[2]).UTC()}, true
}

// ParseNames reads the segment names among names, sorted by revision and closing time.
func ParseNames(names []string) []Meta {
	var out []Meta
	for _, n := range names {
		if m, ok := ParseName(n); ok {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b Meta) int {
		if a.First != b.First {
			return cmpInt(a.First, b.First)
		}
		if a.Last != b.Last {
			return cmpInt(a.Last, b.Last)
		}
		return a.Until.Compare(b.Until)
	})
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// continues says whether m takes the archive on from revision next (the first revision not
// yet covered): it starts at or before next and does not end before it.
func continues(m Meta, next int64) bool { return m.First <= next && m.Last >= next-1 }

// Resume is the revision the archiver goes on from: the one after the newest segment's last;
// 0 when there is no segment (the archiver starts at the cluster's current revision).
func Resume(metas []Meta) int64 {
	var next int64
	for _, m := range metas {
		next = max(next, m.Last+1)
	}
	return next
}

// Chain is the newest unbroken run of segments: every revision from First to Last is in one
// of them, and every change the archiver received before Until.
type Chain struct {
	First, Last int64
	Until       time.Time
}

// NewestChain is the run of segments, sorted (ParseNames), that ends at the newest one with
// no revision missing; ok is false without segments.
func NewestChain(metas []Meta) (Chain, bool) {
	if len(metas) == 0 {
		return Chain{}, false
	}
	c, _ := walk(metas)
	return c, true
}

// NewestGap is the revisions missing before the newest chain (NewestChain), as the archive's
// names say them, with the time the chain after it began; nil when none is missing. A
// restarted archiver reports it again, as the run that met it did.
func NewestGap(metas []Meta) *Gap {
	if len(metas) == 0 {
		return nil
	}
	_, gap := walk(metas)
	return gap
}

// walk goes through the sorted segments once: the newest chain and the gap before it.
func walk(metas []Meta) (Chain, *Gap) {
	c := Chain{First: metas[0].First, Last: metas[0].Last, Until: metas[0].Until}
	var gap *Gap
	for _, m := range metas[1:] {
		if !continues(m, c.Last+1) {
			gap = &Gap{From: c.Last + 1, To: m.First - 1, Time: m.Until}
			c.First = m.First // the run starts again here
		}
		c.Last = max(c.Last, m.Last)
		if m.Until.After(c.Until) {
			c.Until = m.Until
		}
	}
	return c, gap
}

// Target is where a restore goes: a revision, or a time (exactly one of them).
type Target struct {
	Revision int64
	Time     time.Time
}

func (t Target) String() string {
	if t.Revision > 0 {
		return "revision " + strconv.FormatInt(t.Revision, 10)
	}
	return t.Time.UTC().Format(time.RFC3339Nano)
}

// Errors of a restore plan.
var (
	// ErrGap: a revision between the snapshot and the target is in no segment.
	ErrGap = errors.New("the archive has a gap")
	// ErrBeyond: the archive does not reach the target yet.
	ErrBeyond = errors.New("the archive does not reach the target")
)

// Plan is the segments, sorted (ParseNames), to replay on a snapshot of revision base to reach
// target, in order: each continues the one before from base+1 on, up to the target revision,
// or, for a time, up to the first segment closed at or after it. It fails with ErrGap when a
// revision is missing on the way, ErrBeyond when the archive ends before the target.
func Plan(metas []Meta, base int64, target Target) ([]Meta, error) {
	if target.Revision > 0 && target.Revision <= base {
		return nil, nil
	}
	next := base + 1
	var out []Meta
	for _, m := range metas {
		if inBase(m, next) {
			continue
		}
		if !continues(m, next) {
			return nil, fmt.Errorf("%w: revisions %d to %d are in no segment, between the snapshot's revision %d and %s", ErrGap, next, m.First-1, base, target)
		}
		out = append(out, m)
		next = m.Last + 1
		if target.Revision > 0 && next > target.Revision || target.Revision == 0 && !m.Until.Before(target.Time) {
			return out, nil
		}
	}
	return nil, fmt.Errorf("%w: %s; the archive holds revisions up to %d", ErrBeyond, target, next-1)
}

// inBase says whether every revision of m is before next (in the snapshot, or replayed
// already); an empty segment at next is not: it continues the run.
func inBase(m Meta, next int64) bool {
	if m.First == next {
		return false
	}
	return m.Last < next
}

// Prunable is the segments no kept snapshot needs: those that end before the oldest kept
// snapshot's revision (one that ends at it is kept: it may close the time after it). The
// newest segments (those ending at the archive's last revision) are always kept: a restarted
// archiver goes on after them, and a gap behind them stays visible.
func Prunable(metas []Meta, oldestBase int64) []Meta {
	last := Resume(metas) - 1
	var out []Meta
	for _, m := range metas {
		if m.Last < oldestBase && m.Last < last {
			out = append(out, m)
		}
	}
	return out
}
