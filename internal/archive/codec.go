// Package archive is the continuous archive of an etcd cluster's changes: segments of puts and
// deletes, each with its revision, that a restore replays on top of a full snapshot to reach
// any revision or time after it. This file is the segment format alone, a pure codec; the
// archiver (watching and storing) and the replay are apart from it.
package archive

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Segment is the changes of revisions First..Last, in revision order, as the archiver saw them.
// An empty segment (Last == First-1) holds no revision: it only says that nothing changed
// until Until.
type Segment struct {
	First, Last int64
	// Until is when the archiver closed the segment: every change it received before then is
	// in this segment or an earlier one.
	Until  time.Time
	Events []Event
	// Leases are the leases the segment's puts name, with the TTL granted to them as the
	// archiver learned it (0 when the lease was gone before it could ask).
	Leases []Lease
}

// Event is one put or delete of one key at one revision; a transaction that changes several
// keys gives several events of one revision.
type Event struct {
	Revision int64
	// Time is when the archiver received the change; etcd keeps no time per revision.
	Time   time.Time
	Delete bool
	Key    []byte
	Value  []byte // puts only
	Lease  int64  // puts only; 0 for none
}

// Lease is a lease's ID and the TTL (seconds) it was granted.
type Lease struct {
	ID, TTL int64
}

// formatVersion is the version this codec writes; it reads it alone.
const formatVersion = 1

// magic starts every segment; its last byte is the format version.
var magic = []byte{'E', 'T', 'C', 'D', 'S', 'E', 'G', formatVersion}

// ErrCorrupt says a segment is damaged, of another format, or inconsistent.
var ErrCorrupt = errors.New("archive segment is corrupt")

// Encode writes s in the segment format: magic and version, the revisions and time, the
// events, the leases, and the sha256 of everything before it.
func Encode(s Segment) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(magic)
	putVarint(&b, s.First)
	putVarint(&b, s.Last)
	putVarint(&b, s.Until.UnixNano())
	putUvarint(&b, uint64(len(s.Events)))
	for _, e := range s.Events {
		op := byte(0)
		if e.Delete {
			op = 1
		}
		b.WriteByte(op)
		putVarint(&b, e.Revision)
		putVarint(&b, e.Time.UnixNano())
		putVarint(&b, e.Lease)
		putBytes(&b, e.Key)
		putBytes(&b, e.Value)
	}
	putUvarint(&b, uint64(len(s.Leases)))
	for _, l := range s.Leases {
		putVarint(&b, l.ID)
		putVarint(&b, l.TTL)
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes(), nil
}

// check says whether s is a segment Decode would read back: revisions in its range and in
// order, deletes without value or lease, keys not empty.
func (s Segment) check() error {
	if s.First < 1 || s.Last < s.First-1 {
		return fmt.Errorf("%w: revisions %d..%d", ErrCorrupt, s.First, s.Last)
	}
	prev := s.First
	for i, e := range s.Events {
		switch {
		case e.Revision < prev || e.Revision > s.Last:
			return fmt.Errorf("%w: event %d at revision %d, out of order or outside %d..%d", ErrCorrupt, i, e.Revision, s.First, s.Last)
		case len(e.Key) == 0:
			return fmt.Errorf("%w: event %d has no key", ErrCorrupt, i)
		case e.Delete && (len(e.Value) > 0 || e.Lease != 0):
			return fmt.Errorf("%w: delete %d carries a value or a lease", ErrCorrupt, i)
		}
		prev = e.Revision
	}
	return nil
}

// Decode reads a segment Encode wrote, checking its checksum first.
func Decode(data []byte) (Segment, error) {
	if len(data) < len(magic)+sha256.Size || !bytes.Equal(data[:len(magic)-1], magic[:len(magic)-1]) {
		return Segment{}, fmt.Errorf("%w: not a segment", ErrCorrupt)
	}
	if v := data[len(magic)-1]; v != formatVersion {
		return Segment{}, fmt.Errorf("%w: format version %d, this operator reads %d", ErrCorrupt, v, formatVersion)
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return Segment{}, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	r := reader{b: body[len(magic):]}
	s := Segment{First: r.varint(), Last: r.varint(), Until: time.Unix(0, r.varint()).UTC()}
	n := r.count(4) // an event takes at least 4 bytes
	if n > 0 {
		s.Events = make([]Event, 0, n)
	}
	for range n {
		op := r.byte()
		e := Event{Delete: op == 1, Revision: r.varint(), Time: time.Unix(0, r.varint()).UTC(), Lease: r.varint(), Key: r.bytes(), Value: r.bytes()}
		if op > 1 {
			r.err = fmt.Errorf("%w: unknown operation %d", ErrCorrupt, op)
		}
		s.Events = append(s.Events, e)
	}
	m := r.count(2)
	if m > 0 {
		s.Leases = make([]Lease, 0, m)
	}
	for range m {
		s.Leases = append(s.Leases, Lease{ID: r.varint(), TTL: r.varint()})
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d bytes after the leases", ErrCorrupt, len(r.b))
	}
	if r.err != nil {
		return Segment{}, r.err
	}
	return s, s.check()
}

func putVarint(b *bytes.Buffer, v int64) { b.Write(binary.AppendVarint(nil, v)) }

func putUvarint(b *bytes.Buffer, v uint64) { b.Write(binary.AppendUvarint(nil, v)) }

func putBytes(b *bytes.Buffer, p []byte) {
	putUvarint(b, uint64(len(p)))
	b.Write(p)
}

// reader reads the body; the first error sticks and every later read returns zero.
type reader struct {
	b   []byte
	err error
}

// fail marks the body truncated, unless an earlier error stands.
func (r *reader) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated", ErrCorrupt)
	}
	r.b = nil
}

// skip drops the n bytes a varint took; n <= 0 (none read) fails the reader.
func (r *reader) skip(n int) bool {
	if n <= 0 {
		r.fail()
		return false
	}
	r.b = r.b[n:]
	return true
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if !r.skip(n) {
		return 0
	}
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if !r.skip(n) {
		return 0
	}
	return v
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// count reads a count of items of at least minSize bytes each, refusing one the rest of
// the body cannot hold (so a damaged count never allocates much).
func (r *reader) count(minSize int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/minSize) {
		if r.err == nil {
			r.err = fmt.Errorf("%w: %d items cannot fit in %d bytes", ErrCorrupt, n, len(r.b))
		}
		r.b = nil
		return 0
	}
	return int(n)
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	p := bytes.Clone(r.b[:n])
	r.b = r.b[n:]
	return p
}
