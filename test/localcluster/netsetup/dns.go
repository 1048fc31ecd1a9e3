package netsetup

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Zone is the only DNS zone the server is authoritative for. Everything else is refused:
// there is no upstream to forward to.
const Zone = "cluster.local"

// recordTTL is short so that Pods see address changes (a re-created Pod) quickly.
const recordTTL = 5

const (
	// maxUDPResponse is the classic DNS limit; larger answers are truncated and the
	// client retries over TCP. (EDNS is not implemented: answers are tiny.)
	maxUDPResponse = 512
	maxTCPResponse = 65535
	// tcpIdleTimeout closes TCP connections that stop sending queries.
	tcpIdleTimeout = 10 * time.Second
	// maxConsecutiveErrors stops a serve loop whose socket keeps failing instead of
	// spinning on it forever.
	maxConsecutiveErrors = 100
)

// DNS is an authoritative server for cluster.local answering from an in-memory record
// set. A queries return the name's IPv4 addresses (TTL 5s); other types for an existing
// name return an empty NOERROR; unknown names in the zone get NXDOMAIN; names outside
// it get REFUSED. The zero value is not usable; call NewDNS.
type DNS struct {
	zone atomic.Pointer[zoneData]
}

// zoneData is an immutable snapshot, swapped as a whole by SetRecords.
type zoneData struct {
	hosts map[string][]netip.Addr
	// exists holds every name that exists: record names, their ancestors inside the zone
	// (empty non-terminals such as svc.cluster.local answer NOERROR, not NXDOMAIN) and
	// the zone apex.
	exists map[string]bool
	// ptr maps a reverse name (4.3.2.1.in-addr.arpa) to the Pod host names of its address, as
	// CoreDNS answers for the endpoints of a Service a Pod names as its subdomain: etcd looks
	// a peer's address up this way to check the names in its certificate.
	ptr    map[string][]string
	serial uint32
}

// NewDNS returns a server with no records.
func NewDNS() *DNS {
	d := &DNS{}
	d.SetRecords(nil)
	return d
}

// SetRecords replaces all records atomically. Keys are fully-qualified names without
// trailing dot, e.g. "etcd-0.example.default.svc.cluster.local"; they are lower-cased
// and a trailing dot is tolerated. The map is copied.
func (d *DNS) SetRecords(records map[string][]netip.Addr) {
	var serial uint32 = 1
	if old := d.zone.Load(); old != nil {
		serial = old.serial + 1
	}
	z := &zoneData{
		hosts:  make(map[string][]netip.Addr, len(records)),
		exists: map[string]bool{Zone: true},
		ptr:    map[string][]string{},
		serial: serial,
	}
	for name, addrs := range records {
		name = normalizeName(name)
		z.hosts[name] = append(z.hosts[name], addrs...)
		for n := name; inZone(n); n = parentName(n) {
			z.exists[n] = true
		}
		if !isPodHostName(name) {
			continue
		}
		for _, ip := range addrs {
			if rev, ok := reverseName(ip); ok {
				z.ptr[rev] = append(z.ptr[rev], name)
			}
		}
	}
	d.zone.Store(z)
}

// isPodHostName: hostname.subdomain.namespace.svc.cluster.local, a Pod's own name, not its
// Service's (which has one label fewer and many addresses).
func isPodHostName(name string) bool {
	return strings.Count(name, ".") == 5 && strings.HasSuffix(name, ".svc."+Zone)
}

// reverseArpa is the zone of IPv4 reverse names.
const reverseArpa = "in-addr.arpa"

// reverseName is ip's name in in-addr.arpa; IPv4 only, as the local cluster's addresses are.
func reverseName(ip netip.Addr) (string, bool) {
	ip = ip.Unmap()
	if !ip.Is4() {
		return "", false
	}
	b := ip.As4()
	return fmt.Sprintf("%d.%d.%d.%d.%s", b[3], b[2], b[1], b[0], reverseArpa), true
}

func normalizeName(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}

func inZone(name string) bool {
	return name == Zone || strings.HasSuffix(name, "."+Zone)
}

func parentName(name string) string {
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return ""
}

// Serve answers queries over UDP and TCP on addr (e.g. "10.213.0.1:53"; the port must
// not be 0, both protocols use it) until ctx is done. It returns nil after a shutdown
// through ctx, or the error that stopped it.
func (d *DNS) Serve(ctx context.Context, addr string) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("netsetup: dns: %w", err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("netsetup: dns: %w", err)
	}
	return d.ServeListeners(ctx, pc, l)
}

// ServeListeners is Serve on sockets the caller opened (e.g. on port 0 in tests). It
// closes both when it returns.
func (d *DNS) ServeListeners(ctx context.Context, pc net.PacketConn, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		pc.Close()
		l.Close()
	})
	defer stop()

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	// Whichever loop ends first ends the other: a server with one dead protocol is
	// worse than a visible failure.
	wg.Go(func() { errs <- d.serveUDP(ctx, pc); cancel() })
	wg.Go(func() { errs <- d.serveTCP(ctx, l, &wg); cancel() })
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	pc.Close()
	l.Close()
	return errors.Join(all...)
}

// loopError decides what a serve loop does with a socket error: nil with stop=true when
// the server is shutting down, an error after too many failures in a row, else retry.
func loopError(ctx context.Context, err error, consecutive *int) (stop bool, result error) {
	if ctx.Err() != nil {
		return true, nil
	}
	*consecutive++
	if errors.Is(err, net.ErrClosed) || *consecutive >= maxConsecutiveErrors {
		return true, fmt.Errorf("netsetup: dns: %w", err)
	}
	time.Sleep(10 * time.Millisecond)
	return false, nil
}

func (d *DNS) serveUDP(ctx context.Context, pc net.PacketConn) error {
	buf := make([]byte, 65535)
	failures := 0
	for {
		n, peer, err := pc.ReadFrom(buf)
		if err != nil {
			if stop, result := loopError(ctx, err, &failures); stop {
				return result
			}
			continue
		}
		failures = 0
		if resp := d.respond(buf[:n], maxUDPResponse); resp != nil {
			// A lost reply is the client's to retry; nothing to do about it here.
			_, _ = pc.WriteTo(resp, peer)
		}
	}
}

func (d *DNS) serveTCP(ctx context.Context, l net.Listener, wg *sync.WaitGroup) error {
	failures := 0
	for {
		conn, err := l.Accept()
		if err != nil {
			if stop, result := loopError(ctx, err, &failures); stop {
				return result
			}
			continue
		}
		failures = 0
		wg.Go(func() { d.serveTCPConn(ctx, conn) })
	}
}

// serveTCPConn answers length-prefixed queries until the client closes, goes idle or
// the server stops.
func (d *DNS) serveTCPConn(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	for {
		if err := conn.SetDeadline(time.Now().Add(tcpIdleTimeout)); err != nil {
			return
		}
		var size [2]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		query := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(conn, query); err != nil {
			return
		}
		resp := d.respond(query, maxTCPResponse)
		if resp == nil {
			return
		}
		framed := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
		if _, err := conn.Write(append(framed, resp...)); err != nil {
			return
		}
	}
}

// respond builds the reply to one query, or returns nil for input that deserves no
// reply (unparseable header, or a response rather than a query).
func (d *DNS) respond(query []byte, limit int) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	reply := dnsmessage.Header{
		ID:               h.ID,
		Response:         true,
		OpCode:           h.OpCode,
		RecursionDesired: h.RecursionDesired,
	}
	q, err := singleQuestion(&p)
	if err != nil {
		reply.RCode = dnsmessage.RCodeFormatError
		return build(reply, nil, answer{}, limit)
	}
	if h.OpCode != 0 {
		reply.RCode = dnsmessage.RCodeNotImplemented
		return build(reply, &q, answer{}, limit)
	}
	a := d.zone.Load().lookup(q)
	reply.RCode = a.rcode
	reply.Authoritative = a.rcode != dnsmessage.RCodeRefused
	return build(reply, &q, a, limit)
}

// singleQuestion returns the query's only question; DNS servers in practice reject
// anything but exactly one.
func singleQuestion(p *dnsmessage.Parser) (dnsmessage.Question, error) {
	q, err := p.Question()
	if err != nil {
		return q, err
	}
	if _, err := p.Question(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		return q, errors.New("more than one question")
	}
	return q, nil
}

// answer is the outcome of a lookup: the addresses to return and whether to add the
// zone's SOA (negative answers carry it so resolvers cache them only briefly).
type answer struct {
	rcode     dnsmessage.RCode
	addrs     []netip.Addr
	ptrs      []string // host names, for a PTR query
	soa       bool     // in the authority section
	soaAnswer bool     // as the answer (SOA query for the apex)
	serial    uint32
}

func (z *zoneData) lookup(q dnsmessage.Question) answer {
	name := normalizeName(q.Name.String())
	if strings.HasSuffix(name, "."+reverseArpa) && q.Class == dnsmessage.ClassINET {
		return z.lookupPTR(name, q.Type)
	}
	if !inZone(name) || q.Class != dnsmessage.ClassINET {
		return answer{rcode: dnsmessage.RCodeRefused}
	}
	if !z.exists[name] {
		return answer{rcode: dnsmessage.RCodeNameError, soa: true, serial: z.serial}
	}
	a := answer{rcode: dnsmessage.RCodeSuccess, serial: z.serial}
	switch {
	case q.Type == dnsmessage.TypeSOA && name == Zone:
		a.soaAnswer = true
	case q.Type == dnsmessage.TypeA || q.Type == dnsmessage.TypeAAAA || q.Type == dnsmessage.TypeALL:
		a.addrs = filterAddrs(z.hosts[name], q.Type)
	}
	a.soa = len(a.addrs) == 0 && !a.soaAnswer
	return a
}

// lookupPTR answers a reverse name: the Pod host names of the address, NXDOMAIN when it has
// none (nothing else answers for the cluster's addresses).
func (z *zoneData) lookupPTR(name string, t dnsmessage.Type) answer {
	hosts, ok := z.ptr[name]
	if !ok {
		return answer{rcode: dnsmessage.RCodeNameError}
	}
	a := answer{rcode: dnsmessage.RCodeSuccess, serial: z.serial}
	if t == dnsmessage.TypePTR || t == dnsmessage.TypeALL {
		a.ptrs = hosts
	}
	return a
}

// filterAddrs keeps the addresses that match the query type.
func filterAddrs(addrs []netip.Addr, t dnsmessage.Type) []netip.Addr {
	var out []netip.Addr
	for _, ip := range addrs {
		ip = ip.Unmap()
		if (ip.Is4() && t != dnsmessage.TypeAAAA) || (ip.Is6() && t != dnsmessage.TypeA) {
			out = append(out, ip)
		}
	}
	return out
}

// build encodes the reply; if it exceeds limit it sends just the question with the TC
// bit so the client retries over TCP.
func build(h dnsmessage.Header, q *dnsmessage.Question, a answer, limit int) []byte {
	msg, err := encode(h, q, a)
	if err == nil && len(msg) <= limit {
		return msg
	}
	if err != nil {
		h.RCode = dnsmessage.RCodeServerFailure
	} else {
		h.Truncated = true
	}
	msg, err = encode(h, q, answer{})
	if err != nil {
		return nil
	}
	return msg
}

func encode(h dnsmessage.Header, q *dnsmessage.Question, a answer) ([]byte, error) {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), h)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if q == nil {
		return b.Finish()
	}
	if err := b.Question(*q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if err := addAnswers(&b, q.Name, a); err != nil {
		return nil, err
	}
	if err := b.StartAuthorities(); err != nil {
		return nil, err
	}
	if a.soa {
		if err := addSOA(&b, a.serial); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

func addAnswers(b *dnsmessage.Builder, name dnsmessage.Name, a answer) error {
	if a.soaAnswer {
		return addSOA(b, a.serial)
	}
	for _, host := range a.ptrs {
		target, err := dnsmessage.NewName(host + ".")
		if err != nil {
			return err
		}
		hdr := dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassINET, TTL: recordTTL}
		if err := b.PTRResource(hdr, dnsmessage.PTRResource{PTR: target}); err != nil {
			return err
		}
	}
	for _, ip := range a.addrs {
		hdr := dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassINET, TTL: recordTTL}
		var err error
		if ip.Is4() {
			err = b.AResource(hdr, dnsmessage.AResource{A: ip.As4()})
		} else {
			err = b.AAAAResource(hdr, dnsmessage.AAAAResource{AAAA: ip.As16()})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// addSOA adds the zone's SOA; its MinTTL (the negative-caching TTL) matches recordTTL.
func addSOA(b *dnsmessage.Builder, serial uint32) error {
	hdr := dnsmessage.ResourceHeader{
		Name:  dnsmessage.MustNewName(Zone + "."),
		Class: dnsmessage.ClassINET,
		TTL:   recordTTL,
	}
	return b.SOAResource(hdr, dnsmessage.SOAResource{
		NS:      dnsmessage.MustNewName("ns.dns." + Zone + "."),
		MBox:    dnsmessage.MustNewName("hostmaster." + Zone + "."),
		Serial:  serial,
		Refresh: 60,
		Retry:   10,
		Expire:  3600,
		MinTTL:  recordTTL,
	})
}
