// Command snapshot measures the snapshot and restore agents against a floor measured in the
// same run: what a person does by hand with the same tools. No Kubernetes: a real etcd and a
// real MinIO run on loopback, a database of -db-mib is loaded, and then, over -runs runs
// (which side goes first alternates), it times
//
//   - snapshot: `etcd-operator snapshot-agent` to the bucket, beside `etcdctl snapshot save`
//     to a file followed by `mc cp` of that file to the same bucket;
//   - restore: `etcd-operator restore-agent` of that object into a new data directory, beside
//     `mc cp` of the object to a file followed by `etcdutl snapshot restore`;
//
// and reports each side's median with every sample, the ratio agent/by hand, and the agents'
// peak resident memory. It exits non-zero only when something failed, never on a ratio.
//
// make bench-snapshot builds the agent (as make build does) and the test bed's binaries and
// runs this; make bench runs it before the cluster part.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

type options struct {
	runs                 int
	dbMiB, valueKiB      int
	loadTimeout, timeout time.Duration
	agent                string
	etcdDir, minioDir    string
	workDir              string
}

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 3, "how often each time is measured; the median is reported")
	flag.IntVar(&o.dbMiB, "db-mib", 256, "size of the database to load, in MiB")
	flag.IntVar(&o.valueKiB, "value-kib", 100, "size of each value loaded, in KiB")
	flag.DurationVar(&o.loadTimeout, "load-timeout", 10*time.Minute, "longest the load may take; an error after it")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "longest any one measured command may take; an error after it")
	flag.StringVar(&o.agent, "agent", "bin/etcd-operator", "the etcd-operator binary whose agents are measured")
	flag.StringVar(&o.etcdDir, "etcd-dir", "", "directory of etcd, etcdctl and etcdutl (hack/testbed.sh etcd)")
	flag.StringVar(&o.minioDir, "minio-dir", "", "directory of minio and mc (hack/testbed.sh minio)")
	flag.StringVar(&o.workDir, "work-dir", "", "where the temporary directory goes (the system's when empty)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-snapshot:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	started := time.Now()
	b, err := newBench(ctx, o)
	if err != nil {
		return err
	}
	defer b.close()
	if err := b.load(ctx); err != nil {
		return err
	}
	res := newResults()
	if res.idle, err = b.idleAgent(ctx); err != nil {
		return fmt.Errorf("the agent with nothing to do: %w", err)
	}
	for i := range o.runs {
		logf("run %d of %d", i+1, o.runs)
		if err := b.timedRun(ctx, i, res); err != nil {
			return err
		}
	}
	return printReport(os.Stdout, b, res, time.Since(started))
}

// logf reports progress on stderr; the report alone goes to stdout.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench-snapshot %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
