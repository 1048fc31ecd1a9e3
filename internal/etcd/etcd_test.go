package etcd

// Unit tests that need no etcd process.

import (
	"errors"
	"io"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

func TestIDHexAndParseIDRoundTrip(t *testing.T) {
	for _, id := range []uint64{1, 0xa, 0x8e9e05c52164694d, ^uint64(0)} {
		hex := Member{ID: id}.IDHex()
		if strings.HasPrefix(hex, "0") || strings.ToLower(hex) != hex {
			t.Errorf("IDHex(%d) = %q; want lowercase hex without padding", id, hex)
		}
		got, err := ParseID(hex)
		if err != nil || got != id {
			t.Errorf("ParseID(%q) = %d, %v; want %d", hex, got, err, id)
		}
	}
	if got := (Member{ID: 0x8e9e05c52164694d}).IDHex(); got != "8e9e05c52164694d" {
		t.Errorf("IDHex = %q", got)
	}
}

func TestParseIDRejectsGarbage(t *testing.T) {
	for _, in := range []string{"", "xyz", "0x12", "1 2", "10000000000000000"} {
		if id, err := ParseID(in); err == nil {
			t.Errorf("ParseID(%q) = %d, nil; want an error", in, id)
		}
	}
}

func TestTranslateErrorMapsEtcdErrorsToSentinels(t *testing.T) {
	for _, pair := range etcdErrorSentinels {
		// clientv3 hands back EtcdError values; the raw gRPC status is what a
		// caller bypassing its conversion would see. Both must map.
		for _, raw := range []error{rpctypes.Error(pair.etcd), pair.etcd} {
			got := translateError(raw)
			if !errors.Is(got, pair.sentinel) {
				t.Errorf("translateError(%v) does not match %v", raw, pair.sentinel)
			}
			if !errors.Is(got, raw) || got.Error() != raw.Error() {
				t.Errorf("translateError(%v) = %q; want etcd's error and message kept", raw, got)
			}
		}
	}
}

func TestTranslateErrorLeavesOtherErrorsAlone(t *testing.T) {
	if translateError(nil) != nil {
		t.Error("translateError(nil) != nil")
	}
	got := translateError(io.EOF)
	var mapped *etcdError
	if errors.As(got, &mapped) || !errors.Is(got, io.EOF) {
		t.Errorf("translateError(io.EOF) = %#v; want io.EOF unchanged", got)
	}
	got = translateError(rpctypes.ErrKeyNotFound)
	for _, pair := range etcdErrorSentinels {
		if errors.Is(got, pair.sentinel) {
			t.Errorf("unrelated etcd error matched %v", pair.sentinel)
		}
	}
}

func TestNewRequiresEndpoints(t *testing.T) {
	if c, err := New(Config{}); err == nil {
		_ = c.Close()
		t.Fatal("New without endpoints succeeded")
	}
}

func TestDisarmAlarmRefusesWildcards(t *testing.T) {
	// Nothing listens on port 1; the checks must fire before any request.
	c, err := New(Config{Endpoints: []string{"http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	for _, a := range []Alarm{{MemberID: 1, Type: "NONE"}, {MemberID: 1, Type: "nospace"}, {MemberID: 0, Type: AlarmNoSpace}} {
		if err := c.DisarmAlarm(t.Context(), a); err == nil || !strings.Contains(err.Error(), "invalid alarm") {
			t.Errorf("DisarmAlarm(%+v) = %v; want an invalid alarm error", a, err)
		}
	}
}

// A quorum is a strict majority: an even count gains no tolerance over the odd one below it.
func TestQuorum(t *testing.T) {
	for voters, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 7: 4} {
		if got := Quorum(voters); got != want {
			t.Errorf("Quorum(%d) = %d, want %d", voters, got, want)
		}
	}
}

// etcd's "cluster version not found during downgrade", which it answers right after its
// members start, is ErrClusterVersionUnknown, as clientv3 hands it back and as the raw gRPC
// status.
func TestClusterVersionNotFoundIsClassified(t *testing.T) {
	for _, raw := range []error{rpctypes.ErrClusterVersionUnavailable, rpctypes.ErrGRPCClusterVersionUnavailable} {
		if got := translateError(raw); !errors.Is(got, ErrClusterVersionUnknown) {
			t.Errorf("translateError(%v) = %v; want ErrClusterVersionUnknown", raw, got)
		}
	}
}
