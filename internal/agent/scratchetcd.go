package agent

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// scratchEtcd is a one-member etcd on 127.0.0.1 started from a snapshot file, for the restore
// agent to replay the archive on and snapshot again; nothing else reaches it.
type scratchEtcd struct {
	cmd    *exec.Cmd
	cli    *clientv3.Client
	exited chan struct{}
	mu     sync.Mutex
	logs   bytes.Buffer
}

// Write keeps the scratch etcd's output for the error messages.
func (s *scratchEtcd) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs.Len() < 1<<20 {
		s.logs.Write(p)
	}
	return len(p), nil
}

func (s *scratchEtcd) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return tail(s.logs.Bytes())
}

// scratchTimings: a long election timeout raises etcd's shortest lease TTL (1.5 election
// timeouts) well above the replay's lease refresh (archive.Replay keeps every lease alive).
const (
	scratchHeartbeatMillis = 500
	scratchElectionMillis  = 5000
	scratchStartTimeout    = 2 * time.Minute
)

// The scratch etcd's limits on one request: a revision replayed as one transaction fits.
const (
	scratchMaxTxnOps       = 1 << 20
	scratchMaxRequestBytes = 64 << 20
)

// startScratchEtcd restores file into dir with etcdutl and starts etcd on it.
func startScratchEtcd(ctx context.Context, etcd, etcdutl, file, dir string) (*scratchEtcd, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	peer, client := "http://127.0.0.1:"+ports[0], "http://127.0.0.1:"+ports[1]
	data := filepath.Join(dir, "data")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	restore := exec.CommandContext(ctx, etcdutl, "snapshot", "restore", file, "--data-dir="+data, "--name=scratch",
		"--initial-cluster=scratch="+peer, "--initial-advertise-peer-urls="+peer, "--initial-cluster-token=scratch")
	if out, err := restore.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: etcdutl snapshot restore of the base snapshot failed: %w: %s", snapshotstore.ErrCorrupt, err, tail(out))
	}
	s := &scratchEtcd{exited: make(chan struct{})}
	s.cmd = exec.Command(etcd, "--name=scratch", "--data-dir="+data,
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=scratch="+peer, "--initial-cluster-token=scratch",
		"--heartbeat-interval="+strconv.Itoa(scratchHeartbeatMillis), "--election-timeout="+strconv.Itoa(scratchElectionMillis),
		// Nothing trusts the scratch etcd's durability: a restore a crash interrupted starts
		// over from the download. Without fsync, each replayed revision costs no disk flush.
		"--unsafe-no-fsync", "--quota-backend-bytes="+strconv.Itoa(8<<30), "--log-level=warn",
		// A revision is replayed in one transaction, and one revision may hold more changes
		// than a client could send in one: a lease that ends deletes every key it holds at once
		// (kube-apiserver hangs hundreds of events on one lease), beyond the 128 operations and
		// 1.5 MiB a request may have by default.
		"--max-txn-ops="+strconv.Itoa(scratchMaxTxnOps), "--max-request-bytes="+strconv.Itoa(scratchMaxRequestBytes))
	s.cmd.Stdout, s.cmd.Stderr = s, s
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the scratch etcd: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	s.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		MaxCallRecvMsgSize: scratchMaxRequestBytes, MaxCallSendMsgSize: scratchMaxRequestBytes})
	if err != nil {
		s.stop()
		return nil, err
	}
	if err := s.ready(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// ready waits until the scratch etcd serves a read, it exits, or the start timeout passes.
func (s *scratchEtcd) ready(ctx context.Context) error {
	deadline := time.Now().Add(scratchStartTimeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := s.cli.Get(rctx, "\x00", clientv3.WithCountOnly())
		if err != nil {
			<-rctx.Done() // the timeout paces the tries: a failed read may return at once
		}
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("the scratch etcd did not start within %s: %w: %s", scratchStartTimeout, err, s.output())
		}
		select {
		case <-s.exited:
			return fmt.Errorf("the scratch etcd exited: %s", s.output())
		default:
		}
	}
}

// snapshot streams the scratch etcd's snapshot into file and checks etcd's hash at its end.
func (s *scratchEtcd) snapshot(ctx context.Context, file string) error {
	rc, err := s.cli.Snapshot(ctx)
	if err != nil {
		return err
	}
	defer rc.Close() // read-only
	f, err := os.OpenFile(file, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	sr := snapshotstore.NewSnapshotReader(rc)
	_, err = snapshotstore.Copy(f, sr)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !sr.Verified() {
		err = fmt.Errorf("%w: the scratch etcd's snapshot ended before its hash", snapshotstore.ErrCorrupt)
	}
	return err
}

// stop ends the scratch etcd: SIGTERM, then SIGKILL after a grace period.
func (s *scratchEtcd) stop() {
	if s.cli != nil {
		_ = s.cli.Close()
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// freePorts asks the kernel for n unused ports on 127.0.0.1; they are closed before etcd
// binds them.
func freePorts(n int) ([]string, error) {
	var out []string
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		out = append(out, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	return out, nil
}
