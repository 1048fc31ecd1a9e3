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
	// anon is the largest anonymous resident memory (RssAnon: heap, stacks) of any one
	// process, polled like peak: the rest of a Go process's is its binary's own pages.
	anon int64
}

// plus is the cost of running two commands one after the other.
func (c cost) plus(d cost) cost {
	return cost{wall: c.wall + d.wall, peak: max(c.peak, d.peak), treePeak: max(c.treePeak, d.treePeak), anon: max(c.anon, d.anon)}
}

// childless is the cost of a process that starts no child: its rusage peak is its own, and
// exact where the polled one may miss the last moments.
func (c cost) childless() cost {
	c.peak = max(c.peak, c.treePeak)
	return c
}

// hwmPoll is how often a running command's memory is read: often enough that the last read
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
	var mem memory
	done := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		mem.poll(cmd.Process.Pid, done)
	}()
	err := cmd.Wait()
	wall := time.Since(began)
	close(done)
	<-polled
	if err != nil {
		return cost{}, fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, tail(out.Bytes()))
	}
	c := cost{wall: wall, peak: mem.hwm, anon: mem.anon}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		c.treePeak = ru.Maxrss << 10 // KiB on Linux
	}
	return c, nil
}

// memory is the largest VmHWM and RssAnon read of a process. Only its poll writes it, and
// it is read once poll returned.
type memory struct {
	hwm, anon int64
}

// poll reads pid's memory every hwmPoll until done is closed.
func (m *memory) poll(pid int, done <-chan struct{}) {
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	for {
		m.read(path)
		select {
		case <-done:
			return
		case <-time.After(hwmPoll):
		}
	}
}

// read takes the "VmHWM:   1234 kB" and "RssAnon:   1234 kB" lines of a /proc/PID/status
// file; a process that is gone is no error (it ended between two reads).
func (m *memory) read(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close() // read-only
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		kib, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmHWM:":
			m.hwm = max(m.hwm, kib<<10)
		case "RssAnon:":
			m.anon = max(m.anon, kib<<10)
		}
	}
}
