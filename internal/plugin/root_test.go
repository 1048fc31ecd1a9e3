package plugin

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// kubectl's own connection flags come from cli-runtime on the root, so every command takes
// them as kubectl does; -o and the flags the plugin had before keep their names.
func TestRootWiresKubectlsStandardFlags(t *testing.T) {
	flags := NewRootCommand(io.Discard, io.Discard).PersistentFlags()
	for _, name := range []string{
		"kubeconfig", "context", "namespace", "cluster", "user", "server", "token", "as", "as-group", "as-uid",
		"request-timeout", "insecure-skip-tls-verify", "certificate-authority", "client-certificate", "client-key", "output",
	} {
		if flags.Lookup(name) == nil {
			t.Errorf("root has no persistent --%s", name)
		}
	}
	for short, name := range map[string]string{"n": "namespace", "o": "output"} {
		if f := flags.ShorthandLookup(short); f == nil || f.Name != name {
			t.Errorf("-%s is %v, want --%s", short, f, name)
		}
	}
}

// Each new command and Cozystack's names resolve to the command meant, with their arguments;
// wrong argument counts and unknown -o formats are refused before the cluster is reached (no
// kubeconfig is read here: the refusal comes first).
func TestRootParsesCommandsAndArguments(t *testing.T) {
	root := NewRootCommand(io.Discard, io.Discard)
	for _, tc := range []struct {
		args     []string
		command  string
		restArgs []string
	}{
		{[]string{"version"}, "version", []string{}},
		{[]string{"restart", "db"}, "restart", []string{"db"}},
		{[]string{"logs", "db", "db-1", "-f", "--tail", "20", "--previous"}, "logs", []string{"db", "db-1"}},
		{[]string{"report", "db", "-f", "out.tar.gz"}, "report", []string{"db"}},
		{[]string{"forfeit-leadership", "db"}, "move-leader", []string{"db"}},
		{[]string{"snapshot", "db", "/tmp/db.snap"}, "snapshot", []string{"db", "/tmp/db.snap"}},
		{[]string{"snapshot", "save", "db", "/tmp/db.snap"}, "save", []string{"db", "/tmp/db.snap"}},
		{[]string{"remove-member", "db"}, "remove-member", []string{"db"}},
		{[]string{"restore", "db-back", "--from-schedule", "nightly", "--to", "2026-12-02T10:15:00Z"}, "restore", []string{"db-back"}},
	} {
		cmd, rest, err := root.Find(tc.args)
		if err != nil || cmd.Name() != tc.command {
			t.Errorf("%v: found %v, %v; want %s", tc.args, cmd.Name(), err, tc.command)
			continue
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("%v: flags: %v", tc.args, err)
			continue
		}
		if got := cmd.Flags().Args(); !slices.Equal(got, tc.restArgs) {
			t.Errorf("%v: arguments %v, want %v", tc.args, got, tc.restArgs)
		}
		if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
			t.Errorf("%v: %v", tc.args, err)
		}
	}
	logs, _, _ := root.Find([]string{"logs"})
	if f, p, tl := logs.Flags().Lookup("follow"), logs.Flags().Lookup("previous"), logs.Flags().Lookup("tail"); f == nil || f.Shorthand != "f" || p == nil || tl == nil {
		t.Errorf("logs flags: follow %v, previous %v, tail %v", f, p, tl)
	}
	for _, bad := range [][]string{
		{"restart"}, {"restart", "a", "b"}, {"logs"}, {"logs", "a", "b", "c"}, {"report"}, {"version", "x"},
		{"move-leader"}, {"snapshot", "a", "b", "c"}, {"status", "db", "-o", "xml"},
		{"restore", "db-back", "--to", "2026-12-02T10:15:00Z"}, {"restore", "db-back", "--from-schedule", "nightly", "--to", "soon"},
	} {
		root := NewRootCommand(io.Discard, io.Discard)
		root.SetArgs(append(bad, "--kubeconfig", "/nonexistent"))
		err := root.Execute()
		if err == nil || strings.Contains(err.Error(), "kubeconfig") || strings.Contains(err.Error(), "nonexistent") {
			t.Errorf("%v: %v; want a refusal of the arguments", bad, err)
		}
	}
}
