package netpolicy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// DefaultTable is the local cluster's table, in the ip family. Its name says whose it is, so
// that Remove can never take someone else's.
const DefaultTable = "etcd-operator-localcluster-netpol"

// bridgeNFCallIPTables makes the bridge hand the IPv4 frames it switches to the ip family's
// hooks; without it the forward chain never sees Pod-to-Pod traffic.
const bridgeNFCallIPTables = "/proc/sys/net/bridge/bridge-nf-call-iptables"

// Apply replaces the table with one that enforces rules, in one netlink batch: the kernel
// switches from the old rules to the new atomically, so no packet sees a half-built table.
func Apply(table string, rules Ruleset) error {
	if err := os.WriteFile(bridgeNFCallIPTables, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("netpolicy: br_netfilter is needed: %w", err)
	}
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("netpolicy: %w", err)
	}
	t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: table}
	// Adding before deleting makes the deletion succeed whether or not the table existed.
	conn.AddTable(t)
	conn.DelTable(t)
	conn.AddTable(t)
	accept := nftables.ChainPolicyAccept
	chain := conn.AddChain(&nftables.Chain{
		Name: "ingress", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept,
	})
	for _, exprs := range render(rules) {
		conn.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: exprs})
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("netpolicy: writing table %s: %w", table, err)
	}
	return nil
}

// Remove deletes the table; a missing table is no error (Remove runs after crashes too).
func Remove(table string) error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("netpolicy: %w", err)
	}
	conn.DelTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: table})
	if err := conn.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netpolicy: deleting table %s: %w", table, err)
	}
	return nil
}

// render lists the chain's rules: replies of admitted connections pass; then, for each
// isolated destination (in address order, so that equal rulesets render equally), one
// accept per admitted source and port, and a drop of the rest.
func render(rules Ruleset) [][]expr.Any {
	out := [][]expr.Any{establishedAccept()}
	dsts := make([]netip.Addr, 0, len(rules))
	for d := range rules {
		dsts = append(dsts, d)
	}
	slices.SortFunc(dsts, netip.Addr.Compare)
	for _, dst := range dsts {
		for _, a := range rules[dst] {
			out = append(out, acceptRules(dst, a)...)
		}
		out = append(out, append(matchAddr(16, dst), &expr.Verdict{Kind: expr.VerdictDrop}))
	}
	return out
}

func acceptRules(dst netip.Addr, a Allow) [][]expr.Any {
	sources := [][]expr.Any{nil}
	if !a.AnySource {
		sources = nil
		for _, src := range a.Sources {
			sources = append(sources, matchAddr(12, src))
		}
	}
	ports := [][]expr.Any{nil}
	if len(a.Ports) > 0 {
		ports = nil
		for _, p := range a.Ports {
			ports = append(ports, matchPort(p))
		}
	}
	var out [][]expr.Any
	for _, s := range sources {
		for _, p := range ports {
			r := slices.Concat(matchAddr(16, dst), s, p, []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}})
			out = append(out, r)
		}
	}
	return out
}

// matchAddr compares the IPv4 header's address at offset (12 source, 16 destination).
func matchAddr(offset uint32, ip netip.Addr) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip.AsSlice()},
	}
}

var protocolNumbers = map[corev1.Protocol]byte{corev1.ProtocolTCP: unix.IPPROTO_TCP, corev1.ProtocolUDP: unix.IPPROTO_UDP, corev1.ProtocolSCTP: unix.IPPROTO_SCTP}

// matchPort compares the layer 4 protocol and the destination port (the same offset in TCP,
// UDP and SCTP headers).
func matchPort(p Port) []expr.Any {
	out := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protocolNumbers[p.Protocol]}},
	}
	if p.Port == 0 {
		return out
	}
	out = append(out, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2})
	if p.EndPort > p.Port {
		return append(out, &expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: be16(p.Port), ToData: be16(p.EndPort)})
	}
	return append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: be16(p.Port)})
}

func be16(v int32) []byte { return binary.BigEndian.AppendUint16(nil, uint16(v)) }

// establishedAccept: ct state established,related accept.
func establishedAccept() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binary.NativeEndian.AppendUint32(nil, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}
}

// TableExists tells whether the table is on the machine: the local cluster's leftover check.
func TableExists(table string) (bool, error) {
	conn, err := nftables.New()
	if err != nil {
		return false, fmt.Errorf("netpolicy: %w", err)
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return false, fmt.Errorf("netpolicy: listing tables: %w", err)
	}
	return slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == table }), nil
}
