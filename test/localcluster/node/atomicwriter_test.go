package node

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteAtomicallySwitchesWholeSets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	first := map[string]projectedFile{"tls.crt": {[]byte("cert-1"), 0o644}, "tls.key": {[]byte("key-1"), 0o600}}
	changed, err := writeAtomically(dir, first, 0)
	if err != nil || !changed {
		t.Fatalf("first write: changed=%v err=%v", changed, err)
	}
	assertFile(t, filepath.Join(dir, "tls.crt"), "cert-1")
	info, err := os.Stat(filepath.Join(dir, "tls.key"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("tls.key mode = %v (%v), want 0600", info.Mode(), err)
	}

	if changed, err := writeAtomically(dir, first, 0); err != nil || changed {
		t.Fatalf("rewriting the same set: changed=%v err=%v", changed, err)
	}

	second := map[string]projectedFile{"tls.crt": {[]byte("cert-2"), 0o644}, "ca.crt": {[]byte("ca"), 0o644}}
	if changed, err := writeAtomically(dir, second, 0); err != nil || !changed {
		t.Fatalf("second write: changed=%v err=%v", changed, err)
	}
	assertFile(t, filepath.Join(dir, "tls.crt"), "cert-2")
	assertFile(t, filepath.Join(dir, "ca.crt"), "ca")
	if _, err := os.Lstat(filepath.Join(dir, "tls.key")); !os.IsNotExist(err) {
		t.Fatalf("tls.key still visible after it left the set: %v", err)
	}
	generations, _ := filepath.Glob(filepath.Join(dir, "..2*"))
	if len(generations) != 1 {
		t.Fatalf("old generations kept: %v", generations)
	}
}

func TestWriteAtomicallyNestedPaths(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	files := map[string]projectedFile{"conf/app.yaml": {[]byte("a: 1"), 0o644}}
	if _, err := writeAtomically(dir, files, 0); err != nil {
		t.Fatal(err)
	}
	assertFile(t, filepath.Join(dir, "conf", "app.yaml"), "a: 1")
}

func assertFile(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Fatalf("%s = %q (%v), want %q", path, got, err, want)
	}
}
