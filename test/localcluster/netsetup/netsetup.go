// Package netsetup gives the local cluster its network: one host bridge, one network
// namespace per Pod joined to the bridge by a veth pair, per-node IP allocation, and an
// authoritative DNS server for cluster.local.
//
// Everything stays on the bridge: Pods only get a route for the bridge subnet (no default
// route), the host never forwards or NATs, and the Service range is an unreachable route,
// so no packet can leave the machine for an address that is not the cluster's own.
//
// Network configuration is done with iproute2's ip command; all functions need root.
package netsetup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Config names the host-side network objects. Two configs with different Bridge,
// NSPrefix and CIDRs can coexist (tests use their own so a running cluster is untouched).
type Config struct {
	// Bridge is the host bridge name (at most 15 characters).
	Bridge string
	// BridgeCIDR is the bridge's address plus the prefix shared by all Pods, e.g. 10.213.0.1/16.
	BridgeCIDR netip.Prefix
	// ServiceCIDR gets an unreachable route on the host so that a ClusterIP is never routed
	// off the machine.
	ServiceCIDR netip.Prefix
	// NSPrefix starts the name of every Pod network namespace; TearDown removes all
	// namespaces with this prefix.
	NSPrefix string
}

// DefaultConfig returns the addresses fixed by test/localcluster/DESIGN.md.
func DefaultConfig() Config {
	return Config{
		Bridge:      "lcbr0",
		BridgeCIDR:  netip.MustParsePrefix("10.213.0.1/16"),
		ServiceCIDR: netip.MustParsePrefix("10.214.0.0/16"),
		NSPrefix:    "lc-",
	}
}

// netnsDir is where `ip netns` keeps its namespace handles.
const netnsDir = "/run/netns"

// podInterface is the Pod-side interface name, as in any Kubernetes Pod.
const podInterface = "eth0"

// hostVethPrefix starts every host-side veth name.
const hostVethPrefix = "lcv"

// maxInterfaceName is IFNAMSIZ-1, the kernel's limit on interface names.
const maxInterfaceName = 15

// MaxPodNameLength bounds Pod names given to AddPod. Interface names do not depend on it
// (the host veth name is a hash), it only keeps namespace names readable.
const MaxPodNameLength = 63

var podNamePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

func (cfg Config) validate() error {
	if cfg.Bridge == "" || len(cfg.Bridge) > maxInterfaceName || strings.ContainsAny(cfg.Bridge, "/ ") {
		return fmt.Errorf("netsetup: invalid bridge name %q", cfg.Bridge)
	}
	if !cfg.BridgeCIDR.IsValid() || !cfg.BridgeCIDR.Addr().Is4() || cfg.BridgeCIDR.Bits() > 30 {
		return fmt.Errorf("netsetup: bridge CIDR %s must be an IPv4 address with a prefix of at most /30", cfg.BridgeCIDR)
	}
	if !cfg.ServiceCIDR.IsValid() || !cfg.ServiceCIDR.Addr().Is4() {
		return fmt.Errorf("netsetup: service CIDR %s must be an IPv4 prefix", cfg.ServiceCIDR)
	}
	if cfg.ServiceCIDR.Overlaps(cfg.BridgeCIDR) {
		return fmt.Errorf("netsetup: service CIDR %s overlaps bridge CIDR %s", cfg.ServiceCIDR, cfg.BridgeCIDR)
	}
	if cfg.NSPrefix == "" || strings.ContainsAny(cfg.NSPrefix, "/ ") {
		return fmt.Errorf("netsetup: invalid namespace prefix %q", cfg.NSPrefix)
	}
	return nil
}

// SetUp creates the bridge with its address, disables IPv6 on it and adds the unreachable
// route for the Service range. It is idempotent. It deliberately touches neither iptables
// nor ip_forward: Pod traffic is switched by the bridge, never routed.
func SetUp(cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if err := ensureBridge(cfg); err != nil {
		return err
	}
	if ipv6Available() {
		if err := writeSysctl(filepath.Join("/proc/sys/net/ipv6/conf", cfg.Bridge, "disable_ipv6"), "1"); err != nil {
			return err
		}
	}
	steps := [][]string{
		{"addr", "replace", cfg.BridgeCIDR.String(), "dev", cfg.Bridge},
		{"link", "set", "dev", cfg.Bridge, "up"},
		{"route", "replace", "unreachable", cfg.ServiceCIDR.Masked().String()},
	}
	for _, args := range steps {
		if _, err := runIP(args...); err != nil {
			return fmt.Errorf("netsetup: set up bridge %s: %w", cfg.Bridge, err)
		}
	}
	return nil
}

// ensureBridge creates the bridge unless it exists; an existing non-bridge link with the
// same name is an error rather than something to delete.
func ensureBridge(cfg Config) error {
	if linkExists(cfg.Bridge) {
		if !isBridge(cfg.Bridge) {
			return fmt.Errorf("netsetup: link %s exists and is not a bridge", cfg.Bridge)
		}
		return nil
	}
	// A fixed MAC keeps the bridge's address stable; otherwise it follows the lowest
	// port MAC and every Pod's ARP entry for the bridge goes stale when ports change.
	_, err := runIP("link", "add", "name", cfg.Bridge, "address", bridgeMAC(cfg.Bridge),
		"type", "bridge", "stp_state", "0", "forward_delay", "0")
	if err != nil {
		return fmt.Errorf("netsetup: create bridge: %w", err)
	}
	return nil
}

// TearDown removes every network namespace whose name starts with NSPrefix, every link
// attached to the bridge, the bridge and the unreachable route. It kills nothing: a
// namespace still used by a process is only unlinked (its veth is deleted explicitly).
// It is idempotent and works after a crash; it reports all failures, not just the first.
func TearDown(cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	var errs []error
	namespaces, err := listNamespaces(cfg.NSPrefix)
	if err != nil {
		errs = append(errs, err)
	}
	for _, ns := range namespaces {
		errs = append(errs, removePodNetwork(ns))
	}
	errs = append(errs, removeBridge(cfg.Bridge))
	errs = append(errs, removeUnreachableRoute(cfg.ServiceCIDR.Masked()))
	return errors.Join(errs...)
}

// removeBridge deletes the links still attached to the bridge (veths whose namespace
// was busy or already gone), then the bridge itself.
func removeBridge(bridge string) error {
	if !linkExists(bridge) {
		return nil
	}
	var errs []error
	ports, err := bridgePorts(bridge)
	if err != nil {
		errs = append(errs, err)
	}
	for _, port := range ports {
		errs = append(errs, deleteLink(port))
	}
	errs = append(errs, deleteLink(bridge))
	return errors.Join(errs...)
}

func removeUnreachableRoute(prefix netip.Prefix) error {
	out, err := runIP("route", "show", "exact", prefix.String(), "type", "unreachable")
	if err != nil {
		return fmt.Errorf("netsetup: list routes: %w", err)
	}
	if out == "" {
		return nil
	}
	if _, err := runIP("route", "del", "unreachable", prefix.String()); err != nil {
		return fmt.Errorf("netsetup: delete unreachable route: %w", err)
	}
	return nil
}

// NamespacePath returns the path of a Pod's network namespace handle, usable with
// setns(2) or `nsenter --net=`.
func NamespacePath(cfg Config, name string) string {
	return filepath.Join(netnsDir, cfg.NSPrefix+name)
}

// HostVethName returns the host-side veth name of a Pod. It is a hash of the namespace
// name so it always fits the 15-character limit and differs between configs.
func HostVethName(cfg Config, name string) string {
	return hostVethForNamespace(cfg.NSPrefix + name)
}

func hostVethForNamespace(ns string) string {
	sum := sha256.Sum256([]byte(ns))
	return hostVethPrefix + hex.EncodeToString(sum[:])[:maxInterfaceName-len(hostVethPrefix)]
}

// bridgeMAC derives a locally administered unicast MAC from the bridge name.
func bridgeMAC(bridge string) string {
	sum := sha256.Sum256([]byte("bridge/" + bridge))
	return formatMAC([6]byte{0x02, sum[0], sum[1], sum[2], sum[3], sum[4]})
}

// podMAC derives the Pod's MAC from its IP: a Pod re-created with the same IP keeps
// its MAC, so neighbours' ARP caches stay right without gratuitous ARP.
func podMAC(ip netip.Addr) string {
	b := ip.As4()
	return formatMAC([6]byte{0x0a, 0x58, b[0], b[1], b[2], b[3]})
}

func formatMAC(b [6]byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}

func linkExists(name string) bool {
	_, err := os.Lstat(filepath.Join("/sys/class/net", name))
	return err == nil
}

func isBridge(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name, "bridge"))
	return err == nil
}

// linkMaster returns the name of the device a link is enslaved to, or "".
func linkMaster(name string) string {
	target, err := os.Readlink(filepath.Join("/sys/class/net", name, "master"))
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

func bridgePorts(bridge string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join("/sys/class/net", bridge, "brif"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("netsetup: list ports of %s: %w", bridge, err)
	}
	ports := make([]string, 0, len(entries))
	for _, e := range entries {
		ports = append(ports, e.Name())
	}
	return ports, nil
}

// deleteLink deletes a link unless it is already gone (a veth disappears with its peer).
func deleteLink(name string) error {
	if !linkExists(name) {
		return nil
	}
	if _, err := runIP("link", "delete", "dev", name); err != nil && linkExists(name) {
		return fmt.Errorf("netsetup: delete link: %w", err)
	}
	return nil
}

func namespaceExists(ns string) bool {
	_, err := os.Lstat(filepath.Join(netnsDir, ns))
	return err == nil
}

// listNamespaces returns the names of the network namespaces that start with prefix.
func listNamespaces(prefix string) ([]string, error) {
	entries, err := os.ReadDir(netnsDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("netsetup: list network namespaces: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}
