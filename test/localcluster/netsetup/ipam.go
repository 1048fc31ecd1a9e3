package netsetup

import (
	"fmt"
	"net/netip"
	"sync"
)

// IPAM hands out Pod addresses from one node's range. The first two addresses of the
// range (network address and .1) and the last (broadcast) are never handed out.
// Allocation is next-fit: a released address is reused only after the rest of the range,
// so a new Pod rarely inherits a dead Pod's address while peers still remember it.
// It is safe for concurrent use.
type IPAM struct {
	mu     sync.Mutex
	first  netip.Addr // lowest address handed out
	last   netip.Addr // highest address handed out
	next   netip.Addr // where the next search starts
	byKey  map[string]netip.Addr
	byAddr map[netip.Addr]string
}

// NewIPAM returns an allocator for the IPv4 range r, e.g. 10.213.1.0/24. It panics if r
// is not an IPv4 prefix with at least one usable address (/30 or larger): the range is
// fixed configuration, not input.
func NewIPAM(r netip.Prefix) *IPAM {
	if !r.IsValid() || !r.Addr().Is4() || r.Bits() > 30 {
		panic(fmt.Sprintf("netsetup: IPAM range %s must be an IPv4 prefix of /30 or larger", r))
	}
	r = r.Masked()
	first := r.Addr().Next().Next()
	return &IPAM{
		first:  first,
		last:   lastAddr(r).Prev(),
		next:   first,
		byKey:  map[string]netip.Addr{},
		byAddr: map[netip.Addr]string{},
	}
}

// Allocate returns the address held by key, allocating a free one if key has none.
func (m *IPAM) Allocate(key string) (netip.Addr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ip, ok := m.byKey[key]; ok {
		return ip, nil
	}
	ip, ok := m.findFree()
	if !ok {
		return netip.Addr{}, fmt.Errorf("netsetup: no free address in %s-%s for %q", m.first, m.last, key)
	}
	m.assign(key, ip)
	m.next = m.wrap(ip.Next())
	return ip, nil
}

// Reserve records that key holds ip, e.g. for Pods found running after an agent restart.
// Reserving the same pair again is fine; an address held by another key, a key holding
// another address, or an address outside the usable range is an error.
func (m *IPAM) Reserve(key string, ip netip.Addr) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.usable(ip) {
		return fmt.Errorf("netsetup: %s is not a usable address in %s-%s", ip, m.first, m.last)
	}
	if held, ok := m.byKey[key]; ok && held != ip {
		return fmt.Errorf("netsetup: %q already holds %s, cannot reserve %s", key, held, ip)
	}
	if owner, ok := m.byAddr[ip]; ok && owner != key {
		return fmt.Errorf("netsetup: %s is already held by %q", ip, owner)
	}
	m.assign(key, ip)
	return nil
}

// Release frees key's address; releasing an unknown key does nothing.
func (m *IPAM) Release(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ip, ok := m.byKey[key]; ok {
		delete(m.byKey, key)
		delete(m.byAddr, ip)
	}
}

// Lookup returns the address key holds, if any.
func (m *IPAM) Lookup(key string) (netip.Addr, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ip, ok := m.byKey[key]
	return ip, ok
}

func (m *IPAM) assign(key string, ip netip.Addr) {
	m.byKey[key] = ip
	m.byAddr[ip] = key
}

// findFree scans the range once, starting at m.next and wrapping around.
func (m *IPAM) findFree() (netip.Addr, bool) {
	ip := m.next
	for range m.size() {
		if _, used := m.byAddr[ip]; !used {
			return ip, true
		}
		ip = m.wrap(ip.Next())
	}
	return netip.Addr{}, false
}

func (m *IPAM) usable(ip netip.Addr) bool {
	return ip.Is4() && ip.Compare(m.first) >= 0 && ip.Compare(m.last) <= 0
}

// wrap maps an address just past the range back to its start.
func (m *IPAM) wrap(ip netip.Addr) netip.Addr {
	if !m.usable(ip) {
		return m.first
	}
	return ip
}

// size is the number of usable addresses.
func (m *IPAM) size() int {
	f, l := m.first.As4(), m.last.As4()
	from := uint32(f[0])<<24 | uint32(f[1])<<16 | uint32(f[2])<<8 | uint32(f[3])
	to := uint32(l[0])<<24 | uint32(l[1])<<16 | uint32(l[2])<<8 | uint32(l[3])
	return int(to-from) + 1
}
