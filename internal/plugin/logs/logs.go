// Package logs is `kubectl etcd logs`: the etcd container's logs of a cluster's members,
// each line prefixed with its member's name when there are several.
package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Opener opens the log of the etcd container of a member's Pod.
type Opener func(ctx context.Context, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error)

// NewOpener reads logs through the API server, with the user's own rights (pods/log).
func NewOpener(k *cli.Kube) (Opener, error) {
	cs, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
		r, err := cs.CoreV1().Pods(k.Namespace).GetLogs(pod, opts).Stream(ctx)
		return r, cli.ExplainForbidden(err, "get pods/log")
	}, nil
}

type flags struct {
	follow, previous, timestamps bool
	tail                         int64
	since                        time.Duration
}

// options are the PodLogOptions the flags ask for, of the etcd container.
func (f *flags) options() *corev1.PodLogOptions {
	opts := &corev1.PodLogOptions{Container: specs.ContainerName, Follow: f.follow, Previous: f.previous, Timestamps: f.timestamps}
	if f.tail >= 0 {
		opts.TailLines = &f.tail
	}
	if f.since > 0 {
		secs := int64(f.since.Seconds())
		opts.SinceSeconds = &secs
	}
	return opts
}

// NewCmd is `kubectl etcd logs`.
func NewCmd(o *cli.Options) *cobra.Command {
	f := &flags{}
	cmd := o.Command("logs CLUSTER [MEMBER]", "The etcd logs of one member, or of every member with each line prefixed by the member's name",
		cobra.RangeArgs(1, 2), 1, func(cmd *cobra.Command, args []string) error {
			k, err := o.Kube()
			if err != nil {
				return err
			}
			targets, err := targets(cmd.Context(), k, args)
			if err != nil {
				return err
			}
			open, err := NewOpener(k)
			if err != nil {
				return err
			}
			return Print(cmd.Context(), o.Out, o.Err, open, targets, f.options())
		})
	fl := cmd.Flags()
	fl.BoolVarP(&f.follow, "follow", "f", false, "stream the logs as they grow (every member's at once)")
	fl.BoolVarP(&f.previous, "previous", "p", false, "the logs of the container's previous run (before its last restart)")
	fl.BoolVar(&f.timestamps, "timestamps", false, "prefix each line with the time the kubelet received it")
	fl.Int64Var(&f.tail, "tail", -1, "the last N lines of each member (-1: all)")
	fl.DurationVar(&f.since, "since", 0, "only lines newer than this, for example 10m")
	return cmd
}

// targets are the named member, or every member of the cluster in name order.
func targets(ctx context.Context, k *cli.Kube, args []string) ([]string, error) {
	if _, err := k.Cluster(ctx, args[0]); err != nil {
		return nil, err
	}
	members, err := k.Members(ctx, args[0])
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range members {
		if len(args) == 1 || m.Name == args[1] {
			names = append(names, m.Name)
		}
	}
	switch {
	case len(names) == 0 && len(args) == 2:
		return nil, fmt.Errorf("cluster %s has no member %q (kubectl etcd status %s lists them)", args[0], args[1], args[0])
	case len(names) == 0:
		return nil, fmt.Errorf("cluster %s has no members", args[0])
	}
	return names, nil
}

// Print writes the members' logs to out: one member's as they are; several members', each
// line prefixed "[member] ", one member after the other, or interleaved line by line when
// following. A member whose log cannot be read (no Pod, no previous run) is reported on
// errOut and the others are still printed; the command then fails.
func Print(ctx context.Context, out, errOut io.Writer, open Opener, members []string, opts *corev1.PodLogOptions) error {
	w := &lineWriter{out: out}
	var mu sync.Mutex
	var failed []error
	each := func(name string) {
		prefix := ""
		if len(members) > 1 {
			prefix = "[" + name + "] "
		}
		if err := copyLog(ctx, w, open, name, prefix, opts); err != nil {
			mu.Lock()
			failed = append(failed, fmt.Errorf("%s: %w", name, err))
			cli.Say(errOut, "%s: %v\n", name, err)
			mu.Unlock()
		}
	}
	if opts.Follow {
		var wg sync.WaitGroup
		for _, name := range members {
			wg.Go(func() { each(name) })
		}
		wg.Wait()
	} else {
		for _, name := range members {
			each(name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("the logs of %d of %d members could not be read: %w", len(failed), len(members), errors.Join(failed...))
	}
	return nil
}

// copyLog writes one member's log to w, line by line with prefix.
func copyLog(ctx context.Context, w *lineWriter, open Opener, pod, prefix string, opts *corev1.PodLogOptions) error {
	r, err := open(ctx, pod, opts)
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			if line[len(line)-1] != '\n' {
				line += "\n"
			}
			if werr := w.write(prefix + line); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// lineWriter writes whole lines, one writer at a time, so that followed members' lines do
// not mix within a line.
type lineWriter struct {
	mu  sync.Mutex
	out io.Writer
}

func (w *lineWriter) write(line string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := io.WriteString(w.out, line)
	return err
}

// Read is one member's whole log (the current run's, or with previous the run before),
// for the support bundle.
func Read(ctx context.Context, open Opener, pod string, previous bool) ([]byte, error) {
	r, err := open(ctx, pod, &corev1.PodLogOptions{Container: specs.ContainerName, Previous: previous})
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	return io.ReadAll(r)
}
