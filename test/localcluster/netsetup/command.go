package netsetup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// ipCommandPath is where Debian's iproute2 installs ip; PATH is only a fallback because
// node agents may run with a minimal environment.
const ipCommandPath = "/usr/sbin/ip"

// commandTimeout bounds every external command so a wedged netlink call cannot hang a
// node agent forever.
const commandTimeout = 30 * time.Second

// ipBinary returns the path of the ip command.
func ipBinary() string {
	if _, err := os.Stat(ipCommandPath); err == nil {
		return ipCommandPath
	}
	if p, err := exec.LookPath("ip"); err == nil {
		return p
	}
	return ipCommandPath
}

// sysctlBinary returns the path of sysctl; `ip netns exec` resolves a bare name through
// PATH, which may be minimal in a node agent.
func sysctlBinary() string {
	if p, err := exec.LookPath("sysctl"); err == nil {
		return p
	}
	return "/usr/sbin/sysctl"
}

// runIP runs `ip args...` and returns its combined output. The error names the command
// and carries its output, because iproute2's messages are the only useful diagnostics.
func runIP(args ...string) (string, error) {
	return runCommand(ipBinary(), args...)
}

// runCommand runs a command with commandTimeout and a descriptive error.
func runCommand(path string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("timed out after %s", commandTimeout)
		}
		return text, fmt.Errorf("%s %s: %w: %s", path, strings.Join(args, " "), err, text)
	}
	return text, nil
}

// writeSysctl writes value to a file below /proc/sys/net of the caller's network namespace.
func writeSysctl(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("set %s=%s: %w", path, value, err)
	}
	return nil
}

// ipv6Available reports whether the kernel has IPv6; without it there is nothing to disable.
func ipv6Available() bool {
	_, err := os.Stat("/proc/sys/net/ipv6/conf/all/disable_ipv6")
	return err == nil
}
