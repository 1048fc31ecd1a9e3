package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The bench's MinIO credentials and bucket; they guard nothing but the bench's own data.
const (
	accessKey = "bench"
	secretKey = "bench-secret"
	bucket    = "snapshots"
	// mcAlias is how mc names the bench's MinIO (MC_HOST_<alias> in its environment).
	mcAlias = "bench"
)

// bench is the running etcd and MinIO, and the temporary directory holding their data and
// every file the measured commands write.
type bench struct {
	o           options
	dir         string
	etcd, minio *server
	etcdURL     string
	s3URL       string
	cli         *clientv3.Client
	s3          *minio.Client
	db          database
}

// server is a process the bench started. It is killed when the bench ends, and by the kernel
// when the bench itself dies (Pdeathsig), so nothing is left running.
type server struct {
	cmd *exec.Cmd
	log string
}

func newBench(ctx context.Context, o options) (b *bench, err error) {
	if err := checkBinaries(o); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(o.workDir, "bench-snapshot-")
	if err != nil {
		return nil, err
	}
	b = &bench{o: o, dir: dir}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if err := b.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := b.startMinIO(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// checkBinaries fails early, naming what to build, when a binary is missing.
func checkBinaries(o options) error {
	if o.etcdDir == "" || o.minioDir == "" {
		return errors.New("-etcd-dir and -minio-dir are needed: run through 'make bench-snapshot', which builds the test bed")
	}
	for _, p := range []string{o.agent, o.etcd("etcd"), o.etcd("etcdctl"), o.etcd("etcdutl"), o.minio("minio"), o.minio("mc")} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w (make build; hack/testbed.sh etcd; hack/testbed.sh minio)", err)
		}
	}
	return nil
}

func (o options) etcd(name string) string  { return filepath.Join(o.etcdDir, name) }
func (o options) minio(name string) string { return filepath.Join(o.minioDir, name) }

// path is a file or directory in the bench's temporary directory.
func (b *bench) path(elem ...string) string {
	return filepath.Join(append([]string{b.dir}, elem...)...)
}

func (b *bench) startEtcd(ctx context.Context) error {
	urls, err := loopbackURLs(2)
	if err != nil {
		return err
	}
	b.etcdURL = urls[0]
	peerURL := urls[1]
	// The quota leaves room for the database and what its compaction-free growth adds.
	quota := max(int64(2)<<30, 3*int64(b.o.dbMiB)<<20)
	b.etcd, err = b.start(b.o.etcd("etcd"), nil, "--name=bench", "--data-dir="+b.path("etcd"),
		"--listen-client-urls="+b.etcdURL, "--advertise-client-urls="+b.etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=bench="+peerURL, "--log-level=error", fmt.Sprintf("--quota-backend-bytes=%d", quota))
	if err != nil {
		return err
	}
	b.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{b.etcdURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	return b.etcd.waitFor(ctx, "etcd", func(ctx context.Context) error {
		_, err := b.cli.Status(ctx, b.etcdURL)
		return err
	})
}

func (b *bench) startMinIO(ctx context.Context) error {
	urls, err := loopbackURLs(2) // the S3 API's and the console's
	if err != nil {
		return err
	}
	addr := urls[0]
	b.s3URL = addr
	env := []string{"MINIO_ROOT_USER=" + accessKey, "MINIO_ROOT_PASSWORD=" + secretKey, "MINIO_UPDATE=off", "MINIO_BROWSER=off"}
	b.minio, err = b.start(b.o.minio("minio"), env, "server", b.path("minio"),
		"--address", hostPort(addr), "--console-address", hostPort(urls[1]), "--quiet")
	if err != nil {
		return err
	}
	b.s3, err = minio.New(hostPort(addr), &minio.Options{Creds: credentials.NewStaticV4(accessKey, secretKey, "")})
	if err != nil {
		return err
	}
	if err := b.minio.waitFor(ctx, "minio", func(ctx context.Context) error {
		_, err := b.s3.ListBuckets(ctx)
		return err
	}); err != nil {
		return err
	}
	return b.s3.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})
}

// start runs a server with its output in a log file of the temporary directory.
func (b *bench) start(bin string, env []string, args ...string) (*server, error) {
	log := b.path(filepath.Base(bin) + ".log")
	out, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child has its own copy
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &server{cmd: cmd, log: log}, nil
}

// waitFor polls ready for a minute; the error carries the end of the server's log.
func (s *server) waitFor(ctx context.Context, what string, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		try, stop := context.WithTimeout(ctx, 2*time.Second)
		err := ready(try)
		stop()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			logs, _ := os.ReadFile(s.log)
			return fmt.Errorf("%s did not answer within a minute: %w\n%s", what, err, tail(logs))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *server) stop() {
	if s == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// close stops both servers (by their own pids) and removes every file the bench wrote.
func (b *bench) close() {
	if b.cli != nil {
		_ = b.cli.Close()
	}
	b.etcd.stop()
	b.minio.stop()
	if err := os.RemoveAll(b.dir); err != nil {
		logf("removing %s: %v", b.dir, err)
	}
}

// loopbackURLs are n URLs http://127.0.0.1:<port> of distinct ports free when asked; nothing
// else on this machine is expected to take them before the servers do.
func loopbackURLs(n int) ([]string, error) {
	var urls []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // held until all are chosen, so that no two are the same; only the port is wanted
		urls = append(urls, "http://"+l.Addr().String())
	}
	return urls, nil
}

func hostPort(url string) string { return url[len("http://"):] }

func tail(out []byte) string {
	const n = 2000
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}
