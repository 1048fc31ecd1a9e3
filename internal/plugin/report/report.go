// Package report is `kubectl etcd report`: a support bundle of one cluster, as a tar.gz to
// attach to an issue. It holds the operator's objects, the Kubernetes objects the operator
// made, the events about them, what etcd says and the members' logs; of Secrets, names only,
// and everything secret-like it finds elsewhere is scrubbed (Scrubber).
package report

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/logs"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/members"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/status"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/versioncmd"
)

// NewCmd is `kubectl etcd report`.
func NewCmd(o *cli.Options) *cobra.Command {
	var file string
	cmd := o.Command("report CLUSTER [-f FILE]", "A support bundle (tar.gz) of the cluster: its objects, events, etcd's status, member logs; no Secret data",
		cobra.ExactArgs(1), 0, func(cmd *cobra.Command, args []string) error {
			ctx, cluster := cmd.Context(), args[0]
			k, err := o.Kube()
			if err != nil {
				return err
			}
			src, err := source(ctx, o, k, cluster)
			if err != nil {
				return err
			}
			now := time.Now().UTC()
			if file == "" {
				file = fmt.Sprintf("%s-report-%s.tar.gz", cluster, now.Format("20060102-150405"))
			}
			return writeTo(ctx, o, src, cluster, now, file)
		})
	cmd.Flags().StringVarP(&file, "file", "f", "", "where to write the tar.gz (default CLUSTER-report-<UTC time>.tar.gz; - for stdout)")
	return cmd
}

// source reads with the user's rights through k; etcd is asked through a Session of its own.
func source(ctx context.Context, o *cli.Options, k *cli.Kube, cluster string) (Source, error) {
	scheme, err := cli.NewScheme()
	if err != nil {
		return Source{}, err
	}
	open, err := logs.NewOpener(k)
	if err != nil {
		return Source{}, err
	}
	return Source{Client: k.Client, Scheme: scheme, Namespace: k.Namespace, Logs: open,
		Version: versioncmd.Of(ctx, o, false), Etcd: etcdFiles(o, cluster)}, nil
}

// etcdFiles asks the members, as `kubectl etcd status` and `members` do.
func etcdFiles(o *cli.Options, cluster string) func(context.Context) (map[string]any, error) {
	return func(ctx context.Context) (map[string]any, error) {
		s, err := o.Connect(ctx, cluster)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		files := map[string]any{}
		st, err := status.Of(ctx, s)
		if err != nil {
			return files, err
		}
		files["etcd/status.json"] = st
		_, list, err := s.Etcd.MemberList(ctx)
		if err != nil {
			return files, err
		}
		files["etcd/members.json"] = members.Rows(list)
		return files, nil
	}
}

// writeTo writes the report into file ("-": out), removing a file left incomplete.
func writeTo(ctx context.Context, o *cli.Options, src Source, cluster string, now time.Time, file string) error {
	w := o.Out
	var f *os.File
	if file != "-" {
		var err error
		if f, err = os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			return err
		}
		w = f
	}
	n, problems, err := Write(ctx, src, cluster, now, w)
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(file)
		}
	}
	if err != nil {
		return fmt.Errorf("report of %s: %w", cluster, err)
	}
	cli.Say(o.Err, "wrote %s: %d files, Secrets by name only, secret-like values scrubbed", file, n)
	if len(problems) > 0 {
		cli.Say(o.Err, "; %d things could not be read (README.txt in it lists them)", len(problems))
	}
	cli.Say(o.Err, "\n")
	return nil
}

// Write collects the report of the cluster and writes it to w as a tar.gz of files under
// CLUSTER-report-<time>/, every file scrubbed; it returns how many files it wrote and what
// could not be read.
func Write(ctx context.Context, src Source, cluster string, now time.Time, w io.Writer) (int, []string, error) {
	b, err := collect(ctx, src, cluster)
	if err != nil {
		return 0, nil, err
	}
	b.files["README.txt"] = []byte(readme(cluster, src.Namespace, now, b.problems))
	scrub := NewScrubber(b.secretData)
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	dir := fmt.Sprintf("%s-report-%s/", cluster, now.Format("20060102-150405"))
	names := make([]string, 0, len(b.files))
	for name := range b.files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		data := []byte(scrub.Text(string(b.files[name])))
		if err := tw.WriteHeader(&tar.Header{Name: dir + name, Mode: 0o600, Size: int64(len(data)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return 0, nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return 0, nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, nil, err
	}
	return len(names), b.problems, gz.Close()
}

// Files are the files of a report as Write makes it (a tar.gz of one directory), by their
// name inside that directory, and the directory's name: what a person finds on unpacking it.
func Files(r io.Reader) (dir string, files map[string]string, err error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return "", nil, err
	}
	tr := tar.NewReader(gz)
	files = map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir, files, nil
		}
		if err != nil {
			return "", nil, err
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return "", nil, err
		}
		top, name, _ := strings.Cut(h.Name, "/")
		if dir != "" && top != dir {
			return "", nil, fmt.Errorf("%s is outside the report's directory %s", h.Name, dir)
		}
		dir, files[name] = top, string(body)
	}
}

func readme(cluster, namespace string, now time.Time, problems []string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "kubectl etcd report of EtcdCluster %s in namespace %s, %s.\n\n", cluster, namespace, now.Format(time.RFC3339))
	s.WriteString(`etcdcluster.yaml, etcdmembers.yaml, etcdsnapshots.yaml, etcdsnapshotschedules.yaml,
etcddefrags.yaml, etcddefragpolicies.yaml: the operator's objects of this cluster. pods.yaml, pvcs.yaml, services.yaml,
poddisruptionbudgets.yaml: what the operator made for it. events.yaml: the namespace's events
about all of those. secrets.txt: the names of the cluster's Secrets, no data. etcd/: what the
members say (kubectl etcd status -o json, etcd's member list). logs/: each member's etcd log,
and the log of its container's previous run. version.json: kubectl etcd version.

Redacted: managedFields, kubectl's last-applied-configuration, values of environment variables
with secret-like names, every value of the cluster's Secrets wherever it appeared, private
keys, bearer tokens, and the value after = or : of a secret-like key (a password, a token).
`)
	if len(problems) > 0 {
		s.WriteString("\nNot read:\n")
		for _, p := range problems {
			fmt.Fprintf(&s, "- %s\n", p)
		}
	}
	return s.String()
}
