package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Printout is what a command that prints objects prints: Value for -o json and -o yaml, Table
// for the table (wide asks for the extra columns, where the command has any), Names for
// -o name (as kubectl prints them: resource[.group]/name; nil where the command has no
// named objects, which refuses -o name).
type Printout struct {
	Value any
	Table func(w *tabwriter.Writer, wide bool)
	Names []string
}

// Print writes p in the format -o asks for.
func (o *Options) Print(p Printout) error {
	switch o.Output {
	case "json":
		data, err := json.MarshalIndent(p.Value, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(o.Out, string(data))
		return err
	case "yaml":
		data, err := yaml.Marshal(p.Value)
		if err != nil {
			return err
		}
		_, err = o.Out.Write(data)
		return err
	case "name":
		if p.Names == nil {
			return errors.New("-o name: this command prints no named objects; use -o json or yaml")
		}
		for _, n := range p.Names {
			Say(o.Out, "%s\n", n)
		}
		return nil
	}
	w := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	p.Table(w, o.Output == "wide")
	return w.Flush()
}

// Resource names of -o name, as `kubectl get -o name` prints them.
var (
	ResourceEtcdMember   = "etcdmember." + etcdv1.GroupVersion.Group
	ResourceEtcdSnapshot = "etcdsnapshot." + etcdv1.GroupVersion.Group
	ResourcePVC          = "persistentvolumeclaim"
)

// Named is resource/name for each name, for -o name; never nil, so that an empty list
// prints nothing rather than a refusal.
func Named(resource string, names ...string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, resource+"/"+n)
	}
	return out
}

// HumanBytes renders a size the way etcdctl's table does (binary units).
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Row writes one line of a table. A tabwriter only buffers: the output's own error comes
// back from Flush, which Print returns.
func Row(w *tabwriter.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, format, args...)
}

// Say writes a line of progress or outcome for the person running the command. A terminal
// or pipe that stopped reading has nothing to tell the command, which has done its work.
func Say(w io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, format, args...)
}

// Dash is s, or "-" for an empty cell of a table.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
