// Command helper is the program the runtime tests run as a container. Each argument is an
// action, run in order; every action prints "key=value" lines on stdout.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	for _, action := range os.Args[1:] {
		name, arg, _ := strings.Cut(action, "=")
		run(name, arg)
	}
}

func run(name, arg string) {
	switch name {
	case "id":
		groups, _ := os.Getgroups()
		fmt.Printf("uid=%d\ngid=%d\ngroups=%v\n", os.Getuid(), os.Getgid(), groups)
	case "cwd":
		wd, err := os.Getwd()
		fmt.Printf("cwd=%s%s\n", wd, errSuffix(err))
	case "env":
		for _, kv := range os.Environ() {
			fmt.Printf("env=%s\n", kv)
		}
	case "hostname":
		host, err := os.Hostname()
		fmt.Printf("hostname=%s%s\n", host, errSuffix(err))
	case "read":
		data, err := os.ReadFile(arg)
		fmt.Printf("read %s=%s%s\n", arg, strings.TrimSpace(string(data)), errSuffix(err))
	case "write":
		err := os.WriteFile(arg, []byte("written by container\n"), 0o644)
		fmt.Printf("write %s=%s\n", arg, okOrError(err))
	case "ls":
		fmt.Printf("ls %s=%s\n", arg, listDir(arg))
	case "ifaces":
		fmt.Printf("ifaces=%s\n", interfaceNames())
	case "serve":
		serve()
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring-term=yes")
	case "sleep":
		d, _ := time.ParseDuration(arg)
		time.Sleep(d)
	case "exit":
		code, _ := strconv.Atoi(arg)
		os.Exit(code)
	case "stdin":
		data, err := io.ReadAll(os.Stdin)
		fmt.Printf("stdin=%s%s\n", strings.TrimSpace(string(data)), errSuffix(err))
	case "tty":
		fmt.Printf("tty=%v\n", isTerminal(0))
	case "spawn":
		spawnDetached(arg)
	case "print":
		fmt.Println(arg)
	default:
		fmt.Printf("unknown action %q\n", name)
		os.Exit(2)
	}
}

func errSuffix(err error) string {
	if err != nil {
		return " error: " + err.Error()
	}
	return ""
}

func okOrError(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

func listDir(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "error: " + err.Error()
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

func interfaceNames() string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "error: " + err.Error()
	}
	var names []string
	for _, iface := range ifaces {
		names = append(names, iface.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// serve answers every connection with a greeting, for at most two minutes.
func serve() {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Printf("serve=error: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("port=%d\n", listener.Addr().(*net.TCPAddr).Port)
	time.AfterFunc(2*time.Minute, func() { os.Exit(3) })
	for {
		conn, err := listener.Accept()
		if err != nil {
			os.Exit(1)
		}
		fmt.Fprintln(conn, "hello from the container")
		conn.Close()
	}
}

// spawnDetached starts "helper sleep=<arg>" in a new session, i.e. outside the container's
// process group, the way a daemon would escape it.
func spawnDetached(duration string) {
	cmd := exec.Command("/proc/self/exe", "sleep="+duration)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Printf("spawn=error: %v\n", err)
		return
	}
	fmt.Printf("spawned=%d\n", cmd.Process.Pid)
}

func isTerminal(fd uintptr) bool {
	var termios syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCGETS, uintptr(unsafe.Pointer(&termios)))
	return errno == 0
}
