package archive

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"reflect"
	"testing"
	"time"
)

func at(sec int64) time.Time { return time.Unix(1_700_000_000+sec, 123).UTC() }

func sample() Segment {
	return Segment{First: 10, Last: 13, Until: at(5), Events: []Event{
		{Revision: 10, Time: at(1), Key: []byte("/a"), Value: []byte("1"), Lease: 7},
		{Revision: 11, Time: at(2), Key: []byte("/b"), Value: []byte{}},
		{Revision: 11, Time: at(2), Delete: true, Key: []byte("/c")},
		{Revision: 13, Time: at(3), Key: []byte("/\x00bin"), Value: bytes.Repeat([]byte{0xff}, 300)},
	}, Leases: []Lease{{ID: 7, TTL: 60}}}
}

// normal is s as Decode returns it: empty values read back as nil.
func normal(s Segment) Segment {
	for i := range s.Events {
		if len(s.Events[i].Value) == 0 {
			s.Events[i].Value = nil
		}
	}
	return s
}

func TestSegmentsRoundTrip(t *testing.T) {
	for name, s := range map[string]Segment{
		"puts, deletes, a transaction, a lease": sample(),
		"empty: nothing changed until Until":    {First: 14, Last: 13, Until: at(9)},
		"one revision":                          {First: 1, Last: 1, Until: at(0), Events: []Event{{Revision: 1, Time: at(0), Key: []byte("k")}}},
	} {
		data, err := Encode(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, normal(s)) {
			t.Errorf("%s: read back\n%+v\nwant\n%+v", name, got, normal(s))
		}
	}
}

func TestEncodeRefusesAnInconsistentSegment(t *testing.T) {
	for name, s := range map[string]Segment{
		"no revision 0":          {First: 0, Last: 0},
		"last before first-1":    {First: 5, Last: 3},
		"event before the range": {First: 5, Last: 6, Events: []Event{{Revision: 4, Key: []byte("k")}}},
		"event after the range":  {First: 5, Last: 6, Events: []Event{{Revision: 7, Key: []byte("k")}}},
		"out of order":           {First: 5, Last: 6, Events: []Event{{Revision: 6, Key: []byte("k")}, {Revision: 5, Key: []byte("k")}}},
		"no key":                 {First: 5, Last: 6, Events: []Event{{Revision: 5}}},
		"delete with a value":    {First: 5, Last: 6, Events: []Event{{Revision: 5, Delete: true, Key: []byte("k"), Value: []byte("v")}}},
		"delete with a lease":    {First: 5, Last: 6, Events: []Event{{Revision: 5, Delete: true, Key: []byte("k"), Lease: 3}}},
	} {
		if _, err := Encode(s); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// resum replaces the checksum of a (damaged) segment, so that the parser, not the checksum,
// must find what is wrong.
func resum(data []byte) []byte {
	body := bytes.Clone(data[:len(data)-sha256.Size])
	sum := sha256.Sum256(body)
	return append(body, sum[:]...)
}

func TestDecodeRefusesDamage(t *testing.T) {
	good, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[len(magic)+3] ^= 1
	future := bytes.Clone(good)
	future[len(magic)-1] = formatVersion + 1
	badOp := bytes.Clone(good)
	badOp[len(magic)+3+1] = 9 // the first event's operation (First, Last: 1 byte each; Until: 9)
	for name, data := range map[string][]byte{
		"empty":                    nil,
		"not a segment":            []byte("a snapshot, not a segment, long enough to hold a checksum"),
		"a flipped bit":            flipped,
		"truncated":                good[:len(good)-1],
		"a later format version":   future,
		"trailing bytes, resummed": resum(append(bytes.Clone(good[:len(good)-sha256.Size]), 0)),
		"cut short, resummed":      resum(good[:len(good)-sha256.Size-5]),
		"unknown operation":        resum(badOp),
	} {
		if _, err := Decode(data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// FuzzDecode: no input makes Decode panic or allocate beyond its input, and whatever it
// accepts encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	good, _ := Encode(sample())
	empty, _ := Encode(Segment{First: 3, Last: 2, Until: at(1)})
	f.Add(good)
	f.Add(empty)
	f.Add(good[:20])
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			return
		}
		again, err := Encode(s)
		if err != nil {
			t.Fatalf("decoded a segment Encode refuses: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("re-encoded differently")
		}
	})
}
