package netsetup

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as a tiny program run inside Pod namespaces through
// `ip netns exec`, because the machine has no nc and bash cannot listen.
const helperModeEnv = "NETSETUP_TEST_HELPER"

// helperLifetime bounds every helper process even if the test dies without killing it.
const helperLifetime = 30 * time.Second

func TestMain(m *testing.M) {
	switch os.Getenv(helperModeEnv) {
	case "":
		os.Exit(m.Run())
	case "listen":
		os.Exit(helperListen(os.Args[len(os.Args)-2], os.Args[len(os.Args)-1]))
	case "dial":
		os.Exit(helperDial(os.Args[len(os.Args)-1]))
	case "sleep":
		time.Sleep(helperLifetime)
		os.Exit(0)
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", os.Getenv(helperModeEnv))
		os.Exit(2)
	}
}

// helperListen accepts up to count connections on addr, greeting each with "hello",
// and prints "ready" once it listens.
func helperListen(addr, count string) int {
	var n int
	if _, err := fmt.Sscan(count, &n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	time.AfterFunc(helperLifetime, func() { os.Exit(3) })
	fmt.Println("ready")
	for range n {
		conn, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_, _ = io.WriteString(conn, "hello\n")
		conn.Close()
	}
	return 0
}

// helperDial connects to addr and prints the greeting it reads.
func helperDial(addr string) int {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print(strings.TrimSpace(line))
	return 0
}
