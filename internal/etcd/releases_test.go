package etcd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeEtcdDir is a directory whose etcd prints out for --version.
func fakeEtcdDir(t *testing.T, out string) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\ncat <<'OUT'\n" + out + "\nOUT\n"
	if err := os.WriteFile(filepath.Join(dir, "etcd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The releases ETCD_TEST_DIRS lists are read from each etcd's own --version, oldest first,
// whatever order the list has; empty entries are ignored.
func TestListedReleasesReadsEachVersionOldestFirst(t *testing.T) {
	newest := fakeEtcdDir(t, "etcd Version: 3.7.3\nGit SHA: GitNotFound\nGo Version: go1.26")
	oldest := fakeEtcdDir(t, "etcd Version: 3.5.0\nGit SHA: GitNotFound")
	middle := fakeEtcdDir(t, "etcd Version: 3.6.16")
	got, err := listedReleases(strings.Join([]string{newest, "", oldest, middle}, string(os.PathListSeparator)))
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, r := range got {
		versions = append(versions, r.version.String()+"@"+filepath.Dir(r.etcd))
	}
	want := []string{"3.5.0@" + oldest, "3.6.16@" + middle, "3.7.3@" + newest}
	if strings.Join(versions, " ") != strings.Join(want, " ") {
		t.Fatalf("listedReleases = %v; want %v", versions, want)
	}
	if got, err := listedReleases(""); err != nil || len(got) != 0 {
		t.Fatalf("listedReleases of nothing = %v, %v; want none", got, err)
	}
}

// A directory without an etcd, or one whose etcd names no version, fails the run rather
// than testing fewer releases than listed.
func TestListedReleasesRefusesWhatIsNoEtcd(t *testing.T) {
	for name, dir := range map[string]string{
		"no etcd":    t.TempDir(),
		"no version": fakeEtcdDir(t, "etcd Version: unknown"),
	} {
		if got, err := listedReleases(dir); err == nil {
			t.Errorf("%s: listedReleases = %v; want an error", name, got)
		}
	}
}
