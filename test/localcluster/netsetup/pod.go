package netsetup

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// AddPod creates the network namespace NSPrefix+name, joins it to the bridge with a veth
// pair (host side HostVethName, Pod side eth0 holding ip with the bridge's prefix length),
// brings lo and eth0 up and returns the namespace path. The Pod's only route is the one
// for the bridge subnet: there is no default route.
//
// name must match [a-z0-9]([a-z0-9-]*[a-z0-9])? and have at most MaxPodNameLength
// characters. Re-adding an existing Pod with the same ip succeeds without change; with a
// different ip it fails. A half-created Pod (e.g. after a crash) is rebuilt.
func AddPod(cfg Config, name string, ip netip.Addr) (nsPath string, err error) {
	if err := cfg.validate(); err != nil {
		return "", err
	}
	if err := validatePod(cfg, name, ip); err != nil {
		return "", err
	}
	ns := cfg.NSPrefix + name
	complete, err := podIsComplete(cfg, ns, ip)
	if err != nil {
		return "", err
	}
	if complete {
		return NamespacePath(cfg, name), nil
	}
	if err := removePodNetwork(ns); err != nil {
		return "", fmt.Errorf("netsetup: clear half-created pod %s: %w", name, err)
	}
	if err := createPodNetwork(cfg, ns, ip); err != nil {
		// Leave nothing half-made behind; the create error is the one that matters.
		_ = removePodNetwork(ns)
		return "", fmt.Errorf("netsetup: add pod %s: %w", name, err)
	}
	return NamespacePath(cfg, name), nil
}

// RemovePod deletes the Pod's veth pair and network namespace. It is idempotent.
func RemovePod(cfg Config, name string) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if err := validatePodName(name); err != nil {
		return err
	}
	return removePodNetwork(cfg.NSPrefix + name)
}

func validatePodName(name string) error {
	if len(name) > MaxPodNameLength || !podNamePattern.MatchString(name) {
		return fmt.Errorf("netsetup: invalid pod name %q (want [a-z0-9-], at most %d characters)", name, MaxPodNameLength)
	}
	return nil
}

// validatePod rejects addresses outside the bridge subnet and the addresses a host on
// that subnet must not take (network, broadcast, the bridge's own).
func validatePod(cfg Config, name string, ip netip.Addr) error {
	if err := validatePodName(name); err != nil {
		return err
	}
	subnet := cfg.BridgeCIDR.Masked()
	if !ip.Is4() || !subnet.Contains(ip) {
		return fmt.Errorf("netsetup: pod %s: address %s is not in %s", name, ip, subnet)
	}
	if ip == subnet.Addr() || ip == lastAddr(subnet) || ip == cfg.BridgeCIDR.Addr() {
		return fmt.Errorf("netsetup: pod %s: address %s is reserved in %s", name, ip, subnet)
	}
	return nil
}

// podAddress is the Pod's address in `ip addr` notation (ip/bridge prefix length).
func podAddress(cfg Config, ip netip.Addr) string {
	return netip.PrefixFrom(ip, cfg.BridgeCIDR.Bits()).String()
}

// createPodNetwork builds the namespace from scratch. The veth peer is created directly
// inside the namespace, so a crash at any point leaves no Pod-side link in the host.
func createPodNetwork(cfg Config, ns string, ip netip.Addr) error {
	veth := hostVethForNamespace(ns)
	if _, err := runIP("netns", "add", ns); err != nil {
		return err
	}
	_, err := runIP("link", "add", "name", veth, "type", "veth",
		"peer", "name", podInterface, "address", podMAC(ip), "netns", ns)
	if err != nil {
		return err
	}
	if err := attachHostVeth(cfg, ns, veth); err != nil {
		return err
	}
	if err := disablePodIPv6(ns); err != nil {
		return err
	}
	steps := [][]string{
		{"-n", ns, "addr", "add", podAddress(cfg, ip), "dev", podInterface},
		{"-n", ns, "link", "set", "dev", "lo", "up"},
		{"-n", ns, "link", "set", "dev", podInterface, "up"},
	}
	for _, args := range steps {
		if _, err := runIP(args...); err != nil {
			return err
		}
	}
	return nil
}

// attachHostVeth puts the host end on the bridge. The alias names the namespace so that
// `ip link` shows which Pod a hashed veth name belongs to.
func attachHostVeth(cfg Config, ns, veth string) error {
	if ipv6Available() {
		if err := writeSysctl(filepath.Join("/proc/sys/net/ipv6/conf", veth, "disable_ipv6"), "1"); err != nil {
			return err
		}
	}
	steps := [][]string{
		{"link", "set", "dev", veth, "alias", ns},
		{"link", "set", "dev", veth, "master", cfg.Bridge},
		{"link", "set", "dev", veth, "up"},
	}
	for _, args := range steps {
		if _, err := runIP(args...); err != nil {
			return err
		}
	}
	return nil
}

// disablePodIPv6 switches IPv6 off inside the namespace: the cluster is IPv4-only and
// link-local IPv6 would only add noise (router solicitations, DAD) on the bridge.
// /proc/sys/net shows the namespace of the process that opens it, hence the exec.
func disablePodIPv6(ns string) error {
	if !ipv6Available() {
		return nil
	}
	_, err := runIP("netns", "exec", ns, sysctlBinary(), "-q", "-w",
		"net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	return err
}

// podIsComplete reports whether the namespace exists and is fully set up with ip. It
// fails if the namespace holds a different address, because rebuilding it would cut off
// whatever runs inside.
func podIsComplete(cfg Config, ns string, ip netip.Addr) (bool, error) {
	if !namespaceExists(ns) {
		return false, nil
	}
	addrs, err := namespaceAddresses(ns)
	if err != nil {
		return false, nil // no usable eth0: half-created
	}
	want := podAddress(cfg, ip)
	if len(addrs) > 0 && !slices.Contains(addrs, want) {
		return false, fmt.Errorf("netsetup: namespace %s already has address %s, not %s", ns, strings.Join(addrs, ","), want)
	}
	if !slices.Contains(addrs, want) {
		return false, nil
	}
	veth := hostVethForNamespace(ns)
	if !linkExists(veth) || linkMaster(veth) != cfg.Bridge || !linkIsUp(veth) {
		return false, nil
	}
	return namespaceLinksUp(ns)
}

// namespaceAddresses lists eth0's IPv4 addresses inside ns as "ip/bits".
func namespaceAddresses(ns string) ([]string, error) {
	out, err := runIP("-n", ns, "-o", "-4", "addr", "show", "dev", podInterface)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		for i := 0; i+1 < len(fields); i++ {
			if fields[i] == "inet" {
				addrs = append(addrs, fields[i+1])
			}
		}
	}
	return addrs, nil
}

// namespaceLinksUp reports whether lo and eth0 are administratively up inside ns.
func namespaceLinksUp(ns string) (bool, error) {
	for _, dev := range []string{"lo", podInterface} {
		out, err := runIP("-n", ns, "-o", "link", "show", "dev", dev)
		if err != nil {
			return false, nil
		}
		if !hasFlag(out, "UP") {
			return false, nil
		}
	}
	return true, nil
}

// hasFlag reports whether an `ip -o link` line carries flag in its <...> flag list.
func hasFlag(line, flag string) bool {
	start := strings.Index(line, "<")
	end := strings.Index(line, ">")
	if start < 0 || end < start {
		return false
	}
	for _, f := range strings.Split(line[start+1:end], ",") {
		if f == flag {
			return true
		}
	}
	return false
}

// linkIsUp reads IFF_UP from sysfs for a host link.
func linkIsUp(name string) bool {
	data, err := os.ReadFile(filepath.Join("/sys/class/net", name, "flags"))
	if err != nil {
		return false
	}
	var flags uint64
	if _, err := fmt.Sscanf(strings.TrimSpace(string(data)), "0x%x", &flags); err != nil {
		return false
	}
	const iffUp = 0x1
	return flags&iffUp != 0
}

// removePodNetwork deletes the host veth first: if the namespace is still held by a
// process, unlinking it would not destroy the pair.
func removePodNetwork(ns string) error {
	var errs []error
	errs = append(errs, deleteLink(hostVethForNamespace(ns)))
	if namespaceExists(ns) {
		if _, err := runIP("netns", "delete", ns); err != nil && namespaceExists(ns) {
			errs = append(errs, fmt.Errorf("netsetup: delete namespace: %w", err))
		}
	}
	return errors.Join(errs...)
}

// lastAddr returns the highest address of an IPv4 prefix (its broadcast address).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	hostBits := 32 - p.Bits()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= uint32(1)<<hostBits - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
