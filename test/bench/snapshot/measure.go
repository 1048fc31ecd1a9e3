package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// cost is what one or more commands took.
type cost struct {
	wall time.Duration
	// peak is the largest peak resident memory of any one process, its children left out:
	// the kernel's high-water mark (VmHWM), read every hwmPoll while it ran; childless makes
	// it exact for a process that starts no child.
	peak int64
	// treePeak is the rusage's peak, which is also that of any child the process waited for
	// (the restore agent's etcdutl).
	treePeak int64
}

// plus is the cost of running two commands one after the other.
func (c cost) plus(d cost) cost {
	return cost{wall: c.wall + d.wall, peak: max(c.peak, d.peak), treePeak: max(c.treePeak, d.treePeak)}
}

// childless is the cost of a process that starts no child: its rusage peak is its own, and
// exact where the polled one may miss the last moments.
func (c cost) childless() cost {
	c.peak = max(c.peak, c.treePeak)
	return c
}

// hwmPoll is how often a running command's VmHWM is read: often enough that the last read
// before it exits is close to its true peak, rarely enough to cost nothing measurable.
const hwmPoll = 20 * time.Millisecond

// command runs bin with args (and env added to the bench's) and measures it; it fails when
// the command fails, with the end of its output.
func (b *bench) command(ctx context.Context, env []string, bin string, args ...string) (cost, error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return cost{}, err
	}
	var hwm atomic.Int64
	done := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		pollHWM(cmd.Process.Pid, &hwm, done)
	}()
	err := cmd.Wait()
	wall := time.Since(began)
	close(done)
	<-polled
	if err != nil {
		return cost{}, fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, tail(out.Bytes()))
	}
	c := cost{wall: wall, peak: hwm.Load()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		c.treePeak = ru.Maxrss << 10 // KiB on Linux
	}
	return c, nil
}

// pollHWM keeps the largest VmHWM of pid in hwm until done is closed.
func pollHWM(pid int, hwm *atomic.Int64, done <-chan struct{}) {
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	for {
		if v, ok := readHWM(path); ok && v > hwm.Load() {
			hwm.Store(v)
		}
		select {
		case <-done:
			return
		case <-time.After(hwmPoll):
		}
	}
}

// readHWM reads the "VmHWM:   1234 kB" line of a /proc/PID/status file.
func readHWM(path string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close() // read-only
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "VmHWM:" {
			kib, err := strconv.ParseInt(fields[1], 10, 64)
			return kib << 10, err == nil
		}
	}
	return 0, false
}
