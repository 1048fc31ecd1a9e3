package netsetup

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
)

func TestIPAMAllocateIsStablePerKey(t *testing.T) {
	m := NewIPAM(netip.MustParsePrefix("10.213.1.0/24"))
	a1 := mustAllocate(t, m, "a")
	b := mustAllocate(t, m, "b")
	a2 := mustAllocate(t, m, "a")
	if a1 != a2 {
		t.Fatalf("same key got %s then %s", a1, a2)
	}
	if a1 == b {
		t.Fatalf("keys a and b share %s", a1)
	}
	if want := netip.MustParseAddr("10.213.1.2"); a1 != want {
		t.Fatalf("first address = %s, want %s", a1, want)
	}
	if got, ok := m.Lookup("b"); !ok || got != b {
		t.Fatalf("Lookup(b) = %s, %v; want %s, true", got, ok, b)
	}
}

func TestIPAMExhaustionNeverHandsOutReservedAddresses(t *testing.T) {
	m := NewIPAM(netip.MustParsePrefix("10.213.7.0/24"))
	seen := map[netip.Addr]bool{}
	for i := range 253 {
		ip := mustAllocate(t, m, fmt.Sprintf("pod-%d", i))
		last := ip.As4()[3]
		if last == 0 || last == 1 || last == 255 {
			t.Fatalf("handed out reserved address %s", ip)
		}
		if seen[ip] {
			t.Fatalf("handed out %s twice", ip)
		}
		seen[ip] = true
	}
	if ip, err := m.Allocate("one-too-many"); err == nil {
		t.Fatalf("allocation beyond the range succeeded with %s", ip)
	}
	m.Release("pod-17")
	if ip := mustAllocate(t, m, "late"); !seen[ip] {
		t.Fatalf("after a release got %s, which is outside the range", ip)
	}
}

func TestIPAMDoesNotReuseReleasedAddressImmediately(t *testing.T) {
	m := NewIPAM(netip.MustParsePrefix("10.213.1.0/24"))
	a := mustAllocate(t, m, "a")
	mustAllocate(t, m, "b")
	m.Release("a")
	m.Release("a") // releasing twice is harmless
	if c := mustAllocate(t, m, "c"); c == a {
		t.Fatalf("released address %s was reused at once", a)
	}
}

func TestIPAMReserve(t *testing.T) {
	m := NewIPAM(netip.MustParsePrefix("10.213.1.0/24"))
	ip := netip.MustParseAddr("10.213.1.2")
	if err := m.Reserve("restarted", ip); err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	if err := m.Reserve("restarted", ip); err != nil {
		t.Fatalf("Reserve of the same pair again: %v", err)
	}
	if got := mustAllocate(t, m, "restarted"); got != ip {
		t.Fatalf("Allocate after Reserve = %s, want %s", got, ip)
	}
	if got := mustAllocate(t, m, "new"); got == ip {
		t.Fatalf("Allocate handed out the reserved %s", ip)
	}
	bad := map[string]struct {
		key string
		ip  string
	}{
		"held by another key":     {"other", "10.213.1.2"},
		"key holds other address": {"restarted", "10.213.1.9"},
		"network address":         {"x", "10.213.1.0"},
		"dot one":                 {"x", "10.213.1.1"},
		"broadcast":               {"x", "10.213.1.255"},
		"outside the range":       {"x", "10.213.2.5"},
		"ipv6":                    {"x", "fd00::5"},
	}
	for name, c := range bad {
		if err := m.Reserve(c.key, netip.MustParseAddr(c.ip)); err == nil {
			t.Errorf("%s: Reserve(%s, %s) succeeded", name, c.key, c.ip)
		}
	}
}

func TestIPAMConcurrentAllocationsAreUnique(t *testing.T) {
	m := NewIPAM(netip.MustParsePrefix("10.213.3.0/24"))
	const n = 100
	got := make([]netip.Addr, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ip, err := m.Allocate(fmt.Sprintf("k%d", i))
			if err != nil {
				t.Errorf("Allocate: %v", err)
			}
			got[i] = ip
		})
	}
	wg.Wait()
	seen := map[netip.Addr]bool{}
	for _, ip := range got {
		if seen[ip] {
			t.Fatalf("%s allocated twice", ip)
		}
		seen[ip] = true
	}
}

func TestNewIPAMRejectsUnusableRanges(t *testing.T) {
	for _, r := range []string{"fd00::/64", "10.213.1.0/31", "10.213.1.4/32"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewIPAM(%s) did not panic", r)
				}
			}()
			NewIPAM(netip.MustParsePrefix(r))
		}()
	}
}

func mustAllocate(t *testing.T, m *IPAM, key string) netip.Addr {
	t.Helper()
	ip, err := m.Allocate(key)
	if err != nil {
		t.Fatalf("Allocate(%s): %v", key, err)
	}
	return ip
}
