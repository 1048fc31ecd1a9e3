package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// Print writes v as JSON or YAML when -o asks for it, else calls table.
func (o *Options) Print(v any, table func(w *tabwriter.Writer)) error {
	switch o.Output {
	case "json":
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(o.Out, string(data))
		return err
	case "yaml":
		data, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = o.Out.Write(data)
		return err
	}
	w := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	table(w)
	return w.Flush()
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
