package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	rootTmpfsOptions = "mode=0755,size=256m" // writable roots are scratch space: bounded
	devTmpfsOptions  = "mode=0755,size=64k"
	shmTmpfsOptions  = "mode=1777,size=64m"
)

// devices are bind-mounted from the host's /dev when present.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty", "ptmx"}

// buildRoot assembles the container's root under spec.rootDir(), in container-init's own
// mount namespace. Order matters: image files first, then /etc, then volumes (which may
// cover either), and the read-only remount last.
func buildRoot(spec *ContainerSpec) error {
	// Our namespace is a copy of the host's; without this, mounts below could propagate
	// back to the host through shared peer groups.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	root := spec.rootDir()
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, rootTmpfsOptions); err != nil {
		return fmt.Errorf("mount root tmpfs: %w", err)
	}
	steps := []func(root string, spec *ContainerSpec) error{
		makeSkeleton, mountKernelFileSystems, mountDev, mountRootFiles, makeEtc, mountVolumes, makeWorkingDir,
	}
	for _, step := range steps {
		if err := step(root, spec); err != nil {
			return err
		}
	}
	if spec.ReadOnlyRoot {
		if err := unix.Mount("", root, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return fmt.Errorf("remount root read-only: %w", err)
		}
	}
	return nil
}

func makeSkeleton(root string, _ *ContainerSpec) error {
	for _, dir := range []string{"proc", "sys", "dev", "etc", "tmp"} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			return err
		}
	}
	return os.Chmod(filepath.Join(root, "tmp"), 0o777|os.ModeSticky)
}

func mountKernelFileSystems(root string, _ *ContainerSpec) error {
	const safe = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("proc", filepath.Join(root, "proc"), "proc", safe, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	// A fresh sysfs shows the network devices of the container's network namespace.
	if err := unix.Mount("sysfs", filepath.Join(root, "sys"), "sysfs", safe|unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("mount /sys: %w", err)
	}
	return nil
}

// mountDev builds a minimal /dev: a few harmless devices, the host's devpts (so exec with a
// TTY works), the usual symlinks and a /dev/shm. It stays writable even with ReadOnlyRoot,
// like in other runtimes (e.g. for /dev/termination-log).
func mountDev(root string, _ *ContainerSpec) error {
	dev := filepath.Join(root, "dev")
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, devTmpfsOptions); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, name := range devices {
		host := "/dev/" + name
		if _, err := os.Stat(host); err != nil {
			continue
		}
		if err := bindMount(root, host, "/dev/"+name, false, false); err != nil {
			return err
		}
	}
	for link, target := range map[string]string{
		"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(dev, link)); err != nil {
			return err
		}
	}
	if err := os.Mkdir(filepath.Join(dev, "pts"), 0o755); err != nil {
		return err
	}
	if err := unix.Mount("/dev/pts", filepath.Join(dev, "pts"), "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind /dev/pts: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dev, "shm"), 0o755); err != nil { // the tmpfs sets 1777
		return err
	}
	if err := unix.Mount("shm", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, shmTmpfsOptions); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	return nil
}

func mountRootFiles(root string, spec *ContainerSpec) error {
	for _, containerPath := range sortedKeys(spec.RootFiles) {
		if err := bindMount(root, spec.RootFiles[containerPath], containerPath, true, true); err != nil {
			return fmt.Errorf("image file %s: %w", containerPath, err)
		}
	}
	return nil
}

// makeEtc provides /etc/hosts, /etc/resolv.conf and, unless the image has them, an
// /etc/passwd and /etc/group that name the container's user (some programs look it up).
func makeEtc(root string, spec *ContainerSpec) error {
	etcFiles := map[string]string{"/etc/hosts": spec.HostsFile, "/etc/resolv.conf": spec.ResolvConf}
	for containerPath, hostPath := range etcFiles {
		if err := provideFile(root, containerPath, hostPath); err != nil {
			return err
		}
	}
	if _, ok := spec.RootFiles["/etc/passwd"]; !ok {
		if err := writeRootFile(root, "/etc/passwd", passwdContent(spec.UID, spec.GID)); err != nil {
			return err
		}
	}
	if _, ok := spec.RootFiles["/etc/group"]; !ok {
		if err := writeRootFile(root, "/etc/group", groupContent(spec.GID)); err != nil {
			return err
		}
	}
	return nil
}

func provideFile(root, containerPath, hostPath string) error {
	if hostPath == "" {
		return writeRootFile(root, containerPath, "")
	}
	if err := bindMount(root, hostPath, containerPath, true, false); err != nil {
		return fmt.Errorf("%s: %w", containerPath, err)
	}
	return nil
}

func writeRootFile(root, containerPath, content string) error {
	target := inRoot(root, containerPath)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	return os.WriteFile(target, []byte(content), 0o644)
}

func passwdContent(uid, gid int) string {
	content := "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n"
	if uid != 0 && uid != 65534 {
		content += fmt.Sprintf("user%d:x:%d:%d:container user:/:/sbin/nologin\n", uid, uid, gid)
	}
	return content
}

func groupContent(gid int) string {
	content := "root:x:0:\nnogroup:x:65534:\n"
	if gid != 0 && gid != 65534 {
		content += fmt.Sprintf("group%d:x:%d:\n", gid, gid)
	}
	return content
}

// mountVolumes mounts parents before children, so that a volume inside another volume is
// not hidden by it.
func mountVolumes(root string, spec *ContainerSpec) error {
	mounts := append([]Mount(nil), spec.Mounts...)
	sort.SliceStable(mounts, func(i, j int) bool {
		return filepath.Clean(mounts[i].ContainerPath) < filepath.Clean(mounts[j].ContainerPath)
	})
	for _, m := range mounts {
		if err := bindMount(root, m.HostPath, m.ContainerPath, m.ReadOnly, true); err != nil {
			return fmt.Errorf("volume %s -> %s: %w", m.HostPath, m.ContainerPath, err)
		}
	}
	return nil
}

func makeWorkingDir(root string, spec *ContainerSpec) error {
	return os.MkdirAll(inRoot(root, spec.workingDir()), 0o755)
}

// inRoot maps a container path to its place under root (lexically: ".." cannot escape).
func inRoot(root, containerPath string) string {
	return filepath.Join(root, filepath.Clean("/"+containerPath))
}

// bindMount mounts source (a host file or directory) on containerPath, creating the mount
// point.
func bindMount(root, source, containerPath string, readOnly, recursive bool) error {
	info, err := os.Stat(source)
	if err != nil {
		return err
	}
	target := inRoot(root, containerPath)
	if err := makeMountPoint(root, target, info.IsDir()); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND)
	if recursive {
		flags |= unix.MS_REC
	}
	if err := unix.Mount(source, target, "", flags, ""); err != nil {
		return fmt.Errorf("bind %s: %w", source, err)
	}
	if readOnly {
		return makeReadOnly(target, recursive)
	}
	return nil
}

// makeReadOnly uses mount_setattr so that mounts below a recursive bind become read-only
// too; a plain remount only reaches the top mount.
func makeReadOnly(target string, recursive bool) error {
	flags := 0
	if recursive {
		flags = unix.AT_RECURSIVE
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	err := unix.MountSetattr(unix.AT_FDCWD, target, uint(flags), attr)
	if errors.Is(err, unix.ENOSYS) {
		err = unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
	}
	if err != nil {
		return fmt.Errorf("make %s read-only: %w", target, err)
	}
	return nil
}

// makeMountPoint creates target as an empty directory or file. The kernel follows symlinks
// in mount targets, and an image directory or a volume could contain one that points out of
// the root; such a mount point is refused before anything is created through it.
func makeMountPoint(root, target string, isDir bool) error {
	if err := checkInsideRoot(root, target); err != nil {
		return err
	}
	if isDir {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// checkInsideRoot resolves the deepest existing ancestor of target and checks that it is
// still below root.
func checkInsideRoot(root, target string) error {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return err
	}
	existing := target
	for range 256 { // bounded by the path depth
		if _, err := os.Lstat(existing); err == nil || existing == root {
			break
		}
		existing = filepath.Dir(existing)
	}
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return err
	}
	if resolved != realRoot && !strings.HasPrefix(resolved, realRoot+"/") {
		return fmt.Errorf("mount point %s leads out of the container root (to %s)", target, resolved)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
