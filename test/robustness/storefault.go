package robustness

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// dropTable is the nftables table DropTo adds to a Pod's network namespace.
const dropTable = "robustness-drop"

// DropTo makes dst unreachable from the network namespace netns (as ip netns names it, under
// /run/netns): an nftables table of its own in that namespace drops every TCP packet to dst's
// address and port on the way out, so that only that Pod loses only that service (the
// local cluster serves the API server, DNS and MinIO on one address, told apart by port).
// UndropTo removes it.
func DropTo(netns string, dst netip.AddrPort) error {
	if !dst.Addr().Is4() {
		return fmt.Errorf("%s: only IPv4 addresses are dropped", dst)
	}
	return inNetns(netns, func(conn *nftables.Conn) {
		t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: dropTable}
		conn.AddTable(t)
		accept := nftables.ChainPolicyAccept
		chain := conn.AddChain(&nftables.Chain{Name: "output", Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
		conn.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: dropExprs(dst)})
	})
}

// UndropTo removes what DropTo added to netns; a namespace without it is no error.
func UndropTo(netns string) error {
	err := inNetns(netns, func(conn *nftables.Conn) {
		conn.DelTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: dropTable})
	})
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

func inNetns(netns string, build func(*nftables.Conn)) error {
	f, err := os.Open(filepath.Join("/run/netns", netns))
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", netns, err)
	}
	defer f.Close() // only its descriptor is used
	conn, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		return fmt.Errorf("nftables in %s: %w", netns, err)
	}
	build(conn)
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("nftables in %s: %w", netns, err)
	}
	return nil
}

// dropExprs: ip daddr addr, tcp dport port, drop.
func dropExprs(dst netip.AddrPort) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: dst.Addr().AsSlice()},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, dst.Port())},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
}
