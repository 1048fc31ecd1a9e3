package plugin

import (
	"io"
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
