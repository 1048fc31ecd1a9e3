package localcluster

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// sweepKillTimeout bounds the wait for SIGKILLed processes to disappear.
	sweepKillTimeout = 15 * time.Second
	// sweepUnmountRounds bounds how often the mount table is re-read: mounts can be stacked
	// on the same point, and each round removes the top one.
	sweepUnmountRounds = 20
)

// Sweep removes what a crashed or killed cluster in dir left running: it SIGKILLs every
// process whose environment holds exactly the entry MarkerFor(dir) (never the calling
// process), waits until they are gone, then unmounts every mount point at or below dir,
// deepest first, falling back to a lazy unmount. It does not remove files.
func Sweep(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) == "/" {
		return fmt.Errorf("localcluster: Sweep needs an absolute directory below /, got %q", dir)
	}
	dir = filepath.Clean(dir)
	killErr := killMarkedProcesses(MarkerFor(dir))
	unmountErr := unmountBelow(dir)
	return errors.Join(killErr, unmountErr)
}

// killMarkedProcesses kills every marked process and waits (bounded) until none is left.
// Killing is repeated each round because a marked process may have forked a marked child
// between the scan and the signal.
func killMarkedProcesses(marker string) error {
	deadline := time.Now().Add(sweepKillTimeout)
	for {
		pids := markedProcesses(marker)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("localcluster: processes with %s still alive after %v: %v", marker, sweepKillTimeout, pids)
		}
		for _, pid := range pids {
			// ESRCH only means it is already gone.
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// markedProcesses lists live processes (zombies excluded: they are dead and only wait for
// their parent to reap them) whose environment contains marker as a whole entry.
func markedProcesses(marker string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if hasEnvEntry(pid, marker) && !isZombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// hasEnvEntry compares whole NUL-separated entries, so that the marker of /x does not
// match a process of /x2.
func hasEnvEntry(pid int, entry string) bool {
	environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return false // gone, or a kernel thread
	}
	for kv := range bytes.SplitSeq(environ, []byte{0}) {
		if string(kv) == entry {
			return true
		}
	}
	return false
}

func isZombie(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true // gone counts as dead
	}
	// The state follows the command name in parentheses, which may itself contain ") ".
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 || end+2 >= len(stat) {
		return false
	}
	return stat[end+2] == 'Z' || stat[end+2] == 'X'
}

// unmountBelow unmounts every mount point at or below dir until none is left.
func unmountBelow(dir string) error {
	// The mount table shows resolved paths; dir may be reached through a symlink.
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved
	}
	for range sweepUnmountRounds {
		points, err := mountPointsBelow(dir)
		if err != nil {
			return err
		}
		if len(points) == 0 {
			return nil
		}
		for _, p := range points {
			unmount(p)
		}
	}
	points, _ := mountPointsBelow(dir)
	return fmt.Errorf("localcluster: still mounted after %d rounds: %v", sweepUnmountRounds, points)
}

// unmount tries a normal unmount first (it fails while the mount is busy) and detaches the
// mount lazily otherwise; the next round of unmountBelow checks the result.
func unmount(point string) {
	if err := syscall.Unmount(point, 0); err == nil || errors.Is(err, syscall.EINVAL) {
		return
	}
	_ = syscall.Unmount(point, syscall.MNT_DETACH)
}

// mountPointsBelow lists mount points at or below dir from this process's mount table,
// deepest first so that children are unmounted before their parents.
func mountPointsBelow(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var points []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 5 {
			continue
		}
		point := unescapeMountPath(fields[4])
		if point == dir || strings.HasPrefix(point, dir+"/") {
			points = append(points, point)
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	// Stacked mounts repeat a point; sorting by name within a depth makes them adjacent.
	slices.SortFunc(points, func(a, b string) int {
		return cmp.Or(strings.Count(b, "/")-strings.Count(a, "/"), strings.Compare(a, b))
	})
	return slices.Compact(points), nil
}

// unescapeMountPath undoes the octal escapes (\040 for space etc.) of /proc/*/mountinfo.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1:i+4]) {
			v, _ := strconv.ParseUint(s[i+1:i+4], 8, 8)
			b.WriteByte(byte(v))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '7' {
			return false
		}
	}
	return len(s) == 3
}
