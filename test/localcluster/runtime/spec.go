// Package runtime runs the containers of the local cluster as plain Linux processes.
//
// A container is a process in its own private mount namespace whose root is a small tmpfs
// holding only the image files (bind-mounted read-only), /proc, /sys, a minimal /dev, /etc
// files and the volumes. It optionally joins an existing network namespace. There is no
// image unpacking, no cgroup and no PID namespace: isolation is good enough for tests, and
// every process stays visible to the host (and to Sweep through the Marker).
//
// The namespace work happens in a re-executed copy of the calling binary ("container-init",
// see InitMain), because a multi-threaded Go process cannot reliably switch namespaces.
package runtime

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
)

// InitCommand is the first argument that makes the caller's binary run InitMain.
const InitCommand = "container-init"

// Exit codes of a container that never got to run its program. They follow the shell's
// conventions so that the node agent can report them like any other exit code.
const (
	ExitCodeSetupFailed   = 125 // the runtime could not build the container (mounts, user, ...)
	ExitCodeCannotExecute = 126 // the program exists but cannot be executed
	ExitCodeNotFound      = 127 // the program does not exist in the container
)

// defaultPath is what containers get when their Env has no PATH (the value Docker and the
// kubelet use), so that both Args[0] and exec'd commands resolve like in a real runtime.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Mount bind-mounts a host file or directory into the container.
type Mount struct {
	HostPath      string
	ContainerPath string
	ReadOnly      bool
}

// ContainerSpec describes one container.
type ContainerSpec struct {
	ID                 string            // unique, [a-z0-9-]
	StateDir           string            // runtime's own directory for this container; created if missing
	NetNS              string            // path of a network namespace to join; "" = host network
	Hostname           string            // "" = share the host's UTS namespace
	RootFiles          map[string]string // image files: container path -> host path (file or dir), read-only
	Args               []string          // argv; Args[0] resolved against the PATH of Env if not absolute
	Env                []string          // KEY=VALUE
	WorkingDir         string            // default "/"; created if missing
	Mounts             []Mount           // volumes
	HostsFile          string            // host file shown as /etc/hosts ("" = empty file)
	ResolvConf         string            // host file shown as /etc/resolv.conf ("" = empty file)
	UID, GID           int               // run as this user and group
	SupplementalGroups []int             // extra groups of the process
	ReadOnlyRoot       bool              // the tmpfs root is read-only (mounts and /dev stay as they are)
	LogPath            string            // stdout and stderr are appended here ("" = discarded)
	Marker             string            // KEY=VALUE added to the environment so Sweep can find leftovers
}

var validID = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,200}$`)

func (s *ContainerSpec) validate() error {
	if !validID.MatchString(s.ID) {
		return fmt.Errorf("container id %q: want [a-z0-9-]", s.ID)
	}
	if s.StateDir == "" || !path.IsAbs(s.StateDir) {
		return fmt.Errorf("container %s: StateDir %q must be an absolute path", s.ID, s.StateDir)
	}
	if len(s.Args) == 0 || s.Args[0] == "" {
		return fmt.Errorf("container %s: no command", s.ID)
	}
	if s.Marker != "" && !strings.Contains(s.Marker, "=") {
		return fmt.Errorf("container %s: marker %q is not KEY=VALUE", s.ID, s.Marker)
	}
	if err := s.validatePaths(); err != nil {
		return err
	}
	if s.NetNS != "" {
		if _, err := os.Stat(s.NetNS); err != nil {
			return fmt.Errorf("container %s: network namespace: %w", s.ID, err)
		}
	}
	return nil
}

// validatePaths checks that every path the root is built from is absolute.
func (s *ContainerSpec) validatePaths() error {
	for containerPath := range s.RootFiles {
		if !path.IsAbs(containerPath) {
			return fmt.Errorf("container %s: root file %q is not absolute", s.ID, containerPath)
		}
	}
	for _, m := range s.Mounts {
		if !path.IsAbs(m.ContainerPath) || !path.IsAbs(m.HostPath) {
			return fmt.Errorf("container %s: mount %s -> %s: paths must be absolute", s.ID, m.HostPath, m.ContainerPath)
		}
	}
	if s.WorkingDir != "" && !path.IsAbs(s.WorkingDir) {
		return fmt.Errorf("container %s: working dir %q is not absolute", s.ID, s.WorkingDir)
	}
	return nil
}

// processEnv is the environment of the container's processes (main and exec'd): Env, a
// default PATH when Env has none, and the Marker.
func (s *ContainerSpec) processEnv() []string {
	env := append([]string(nil), s.Env...)
	if lookupEnv(env, "PATH") == "" {
		env = append(env, "PATH="+defaultPath)
	}
	if s.Hostname != "" && lookupEnv(env, "HOSTNAME") == "" {
		env = append(env, "HOSTNAME="+s.Hostname)
	}
	if s.Marker != "" {
		env = append(env, s.Marker)
	}
	return env
}

func (s *ContainerSpec) workingDir() string {
	if s.WorkingDir == "" {
		return "/"
	}
	return s.WorkingDir
}

// lookupEnv returns the value of the last KEY= entry, as getenv would.
func lookupEnv(env []string, key string) string {
	value := ""
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			value = v
		}
	}
	return value
}

// rootDir is where container-init mounts the container's tmpfs root (inside its own mount
// namespace only, so the host never sees that mount).
func (s *ContainerSpec) rootDir() string { return path.Join(s.StateDir, "rootfs") }

func (s *ContainerSpec) specFile() string { return path.Join(s.StateDir, "spec.json") }
