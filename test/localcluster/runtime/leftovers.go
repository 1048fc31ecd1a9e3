package runtime

import (
	"os"
	"strconv"
	"syscall"
	"time"
)

// killMountNamespace SIGKILLs every process in the mount namespace mntNS, which is exactly
// the container's processes: its main process, its children (even those that left the
// process group) and commands started by Exec. Without a PID namespace the kernel does not
// do this for us when the main process dies.
func killMountNamespace(mntNS string) {
	if mntNS == "" {
		return
	}
	for range 100 { // a fork bomb could outrun one pass; 100 passes of 20ms bound the effort
		pids := processesInMountNamespace(mntNS)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processesInMountNamespace lists live processes whose mount namespace is mntNS. Zombies
// have no namespace links any more, so they are not listed (their parent reaps them).
func processesInMountNamespace(mntNS string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil || pid == self {
			continue
		}
		ns, err := os.Readlink("/proc/" + entry.Name() + "/ns/mnt")
		if err == nil && ns == mntNS {
			pids = append(pids, pid)
		}
	}
	return pids
}
