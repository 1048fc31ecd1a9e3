package netsetup

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// startDNS serves d on 127.0.0.1 with one port for UDP and TCP and stops it at cleanup,
// checking that the shutdown is clean.
func startDNS(t *testing.T, d *DNS) string {
	t.Helper()
	pc, l := listenSamePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.ServeListeners(ctx, pc, l) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeListeners after cancel: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("DNS server did not stop")
		}
	})
	return l.Addr().String()
}

// listenSamePort opens TCP on a free loopback port and UDP on the same port, retrying a
// few times in case the UDP port is taken.
func listenSamePort(t *testing.T) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen tcp: %v", err)
		}
		pc, err := net.ListenPacket("udp", l.Addr().String())
		if err == nil {
			return pc, l
		}
		l.Close()
	}
	t.Fatalf("no loopback port free for both UDP and TCP")
	return nil, nil
}

func resolverFor(addr string) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}

func lookup(t *testing.T, r *net.Resolver, name string) ([]netip.Addr, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip4", name)
	slices.SortFunc(addrs, netip.Addr.Compare)
	return addrs, err
}

func TestDNSAnswersARecordsThroughGoResolver(t *testing.T) {
	d := NewDNS()
	d.SetRecords(map[string][]netip.Addr{
		"etcd-0.example.default.svc.cluster.local": {netip.MustParseAddr("10.213.1.2")},
		"Example.Default.svc.cluster.local.": {
			netip.MustParseAddr("10.213.1.3"), netip.MustParseAddr("10.213.1.2"),
		},
	})
	r := resolverFor(startDNS(t, d))

	got, err := lookup(t, r, "etcd-0.example.default.svc.cluster.local.")
	if err != nil || !slices.Equal(got, []netip.Addr{netip.MustParseAddr("10.213.1.2")}) {
		t.Fatalf("single A: got %v, %v", got, err)
	}
	got, err = lookup(t, r, "EXAMPLE.default.svc.cluster.local.")
	want := []netip.Addr{netip.MustParseAddr("10.213.1.2"), netip.MustParseAddr("10.213.1.3")}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("multiple A: got %v, %v; want %v", got, err, want)
	}
	_, err = lookup(t, r, "missing.default.svc.cluster.local.")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Fatalf("unknown name: got %v, want not found", err)
	}
}

func TestDNSResponseCodes(t *testing.T) {
	d := NewDNS()
	d.SetRecords(map[string][]netip.Addr{
		"etcd-0.example.default.svc.cluster.local": {netip.MustParseAddr("10.213.1.2")},
	})
	addr := startDNS(t, d)
	cases := []struct {
		name    string
		qtype   dnsmessage.Type
		rcode   dnsmessage.RCode
		answers int
	}{
		{"etcd-0.example.default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 1},
		{"etcd-0.example.default.svc.cluster.local.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, 0},
		{"nope.default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, 0},
		{"svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 0}, // empty non-terminal
		{"cluster.local.", dnsmessage.TypeSOA, dnsmessage.RCodeSuccess, 1},
		{"example.com.", dnsmessage.TypeA, dnsmessage.RCodeRefused, 0},
		{"notcluster.local.", dnsmessage.TypeA, dnsmessage.RCodeRefused, 0},
	}
	for _, c := range cases {
		for _, network := range []string{"udp", "tcp"} {
			msg := query(t, network, addr, c.name, c.qtype)
			if msg.RCode != c.rcode || len(msg.Answers) != c.answers {
				t.Errorf("%s %s %v: rcode %v with %d answers, want %v with %d",
					network, c.name, c.qtype, msg.RCode, len(msg.Answers), c.rcode, c.answers)
			}
			if c.rcode != dnsmessage.RCodeRefused && !msg.Authoritative {
				t.Errorf("%s %s: answer not authoritative", network, c.name)
			}
		}
	}
}

func TestDNSAnswerCarriesTTL(t *testing.T) {
	d := NewDNS()
	d.SetRecords(map[string][]netip.Addr{"a.cluster.local": {netip.MustParseAddr("10.213.1.9")}})
	msg := query(t, "udp", startDNS(t, d), "a.cluster.local.", dnsmessage.TypeA)
	if len(msg.Answers) != 1 {
		t.Fatalf("got %d answers, want 1", len(msg.Answers))
	}
	a, ok := msg.Answers[0].Body.(*dnsmessage.AResource)
	if !ok || netip.AddrFrom4(a.A) != netip.MustParseAddr("10.213.1.9") || msg.Answers[0].Header.TTL != 5 {
		t.Fatalf("answer = %+v, want A 10.213.1.9 TTL 5", msg.Answers[0])
	}
}

func TestDNSSetRecordsReplacesEverything(t *testing.T) {
	d := NewDNS()
	d.SetRecords(map[string][]netip.Addr{"old.cluster.local": {netip.MustParseAddr("10.213.1.2")}})
	r := resolverFor(startDNS(t, d))
	if _, err := lookup(t, r, "old.cluster.local."); err != nil {
		t.Fatalf("old name before replacement: %v", err)
	}
	d.SetRecords(map[string][]netip.Addr{"new.cluster.local": {netip.MustParseAddr("10.213.1.4")}})
	if _, err := lookup(t, r, "old.cluster.local."); err == nil {
		t.Fatalf("old name still resolves after replacement")
	}
	got, err := lookup(t, r, "new.cluster.local.")
	if err != nil || !slices.Equal(got, []netip.Addr{netip.MustParseAddr("10.213.1.4")}) {
		t.Fatalf("new name: got %v, %v", got, err)
	}
}

func TestDNSTruncatesLargeUDPAnswersAndServesThemOverTCP(t *testing.T) {
	var many []netip.Addr
	for i := 2; i < 102; i++ {
		many = append(many, netip.AddrFrom4([4]byte{10, 213, 1, byte(i)}))
	}
	d := NewDNS()
	d.SetRecords(map[string][]netip.Addr{"big.default.svc.cluster.local": many})
	addr := startDNS(t, d)

	udp := query(t, "udp", addr, "big.default.svc.cluster.local.", dnsmessage.TypeA)
	if !udp.Truncated {
		t.Fatalf("100 A records over UDP were not truncated (%d answers)", len(udp.Answers))
	}
	tcp := query(t, "tcp", addr, "big.default.svc.cluster.local.", dnsmessage.TypeA)
	if tcp.Truncated || len(tcp.Answers) != len(many) {
		t.Fatalf("TCP: truncated=%v with %d answers, want all %d", tcp.Truncated, len(tcp.Answers), len(many))
	}
	got, err := lookup(t, resolverFor(addr), "big.default.svc.cluster.local.")
	if err != nil || len(got) != len(many) {
		t.Fatalf("Go resolver (falls back to TCP): %d addresses, %v", len(got), err)
	}
}

func TestDNSServeOnAddressStopsWithContext(t *testing.T) {
	pc, l := listenSamePort(t)
	addr := l.Addr().String()
	pc.Close()
	l.Close()

	d := NewDNS()
	d.SetRecords(map[string][]netip.Addr{"x.cluster.local": {netip.MustParseAddr("10.213.1.5")}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, addr) }()

	r := resolverFor(addr)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := lookup(t, r, "x.cluster.local."); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("Serve(%s) never answered: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v after cancel, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Serve did not return after cancel")
	}
}

func TestDNSServeReportsListenErrors(t *testing.T) {
	err := NewDNS().Serve(context.Background(), "127.0.0.1:notaport")
	if err == nil {
		t.Fatalf("Serve on a bad address succeeded")
	}
}

// query sends one question over network ("udp" or "tcp") and parses the reply.
func query(t *testing.T, network, addr, name string, qtype dnsmessage.Type) dnsmessage.Message {
	t.Helper()
	req := dnsmessage.Message{
		Header: dnsmessage.Header{ID: 4242, RecursionDesired: true},
		Questions: []dnsmessage.Question{{
			Name: dnsmessage.MustNewName(name), Type: qtype, Class: dnsmessage.ClassINET,
		}},
	}
	packed, err := req.Pack()
	if err != nil {
		t.Fatalf("pack: %v", err)
	}
	raw, err := exchange(network, addr, packed)
	if err != nil {
		t.Fatalf("%s query %s: %v", network, name, err)
	}
	var msg dnsmessage.Message
	if err := msg.Unpack(raw); err != nil {
		t.Fatalf("unpack reply to %s: %v", name, err)
	}
	if msg.ID != req.ID || !msg.Response {
		t.Fatalf("reply to %s has id %d response=%v", name, msg.ID, msg.Response)
	}
	return msg
}

func exchange(network, addr string, packed []byte) ([]byte, error) {
	conn, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return nil, err
	}
	if network == "udp" {
		if _, err := conn.Write(packed); err != nil {
			return nil, err
		}
		buf := make([]byte, 65535)
		n, err := conn.Read(buf)
		return buf[:n], err
	}
	if _, err := conn.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(packed))), packed...)); err != nil {
		return nil, err
	}
	var size [2]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, err
	}
	reply := make([]byte, binary.BigEndian.Uint16(size[:]))
	_, err = io.ReadFull(conn, reply)
	return reply, err
}

// A Pod's address resolves back to its host name, as CoreDNS answers for a headless
// Service's endpoints: etcd checks a peer's certificate against the names of its address.
// Its Service's name is no answer, and an address without a Pod host name is not found.
func TestDNSAnswersPTRWithThePodsHostName(t *testing.T) {
	d := NewDNS()
	d.SetRecords(map[string][]netip.Addr{
		"etcd-0.example.default.svc.cluster.local": {netip.MustParseAddr("10.213.1.2")},
		"example.default.svc.cluster.local":        {netip.MustParseAddr("10.213.1.2"), netip.MustParseAddr("10.213.1.3")},
	})
	r := resolverFor(startDNS(t, d))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	names, err := r.LookupAddr(ctx, "10.213.1.2")
	if err != nil || !slices.Equal(names, []string{"etcd-0.example.default.svc.cluster.local."}) {
		t.Fatalf("PTR of a Pod's address: %v, %v", names, err)
	}
	_, err = r.LookupAddr(ctx, "10.213.1.3")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Fatalf("PTR of an address without a Pod host name: %v, want not found", err)
	}
}
