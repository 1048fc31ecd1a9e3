package image

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// binaries writes one distinct fake binary per platform: the test checks that each platform's
// image carries its own.
func binaries(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		path := filepath.Join(dir, filepath.Base(p))
		if err := os.WriteFile(path, []byte("binary for "+p), 0o755); err != nil {
			t.Fatal(err)
		}
		out[p] = path
	}
	return out
}

func TestImageIsMultiPlatformNonRootWithTheBinaryAsEntrypoint(t *testing.T) {
	bins := binaries(t)
	spec := Spec{Binaries: bins, Version: "v1.2.3", Revision: "abc", Created: time.Unix(1700000000, 0)}
	idx, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	written, err := Write(dir, "ghcr.io/quorumkeeper/etcd-operator:v1.2.3", idx)
	if err != nil {
		t.Fatal(err)
	}
	for platform, binary := range bins {
		img, err := FromLayout(written.Layout, platform)
		if err != nil {
			t.Fatalf("%s from the OCI layout: %v", platform, err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.OS + "/" + cfg.Architecture; got != platform {
			t.Errorf("config platform = %s, want %s", got, platform)
		}
		if cfg.Config.User != "65532:65532" {
			t.Errorf("%s: user = %q, want 65532:65532 (non-root)", platform, cfg.Config.User)
		}
		if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/etcd-operator" {
			t.Errorf("%s: entrypoint = %q, want [/etcd-operator]", platform, cfg.Config.Entrypoint)
		}
		for key, want := range map[string]string{
			"org.opencontainers.image.version":  "v1.2.3",
			"org.opencontainers.image.revision": "abc",
			"org.opencontainers.image.licenses": "Apache-2.0",
			"org.opencontainers.image.source":   "https://github.com/quorumkeeper/etcd-operator",
			"app.kubernetes.io/version":         "v1.2.3",
		} {
			if got := cfg.Config.Labels[key]; got != want {
				t.Errorf("%s: label %s = %q, want %q", platform, key, got, want)
			}
		}
		checkRootHoldsTheBinaryAlone(t, img, binary)
	}
	if len(written.Tarballs) != 2 {
		t.Fatalf("docker archives = %v, want one per platform", written.Tarballs)
	}
	checkDockerArchive(t, written.Tarballs["linux/arm64"])
}

// checkRootHoldsTheBinaryAlone: no shell or any other file, and the binary is this platform's.
func checkRootHoldsTheBinaryAlone(t *testing.T, img v1.Image, binary string) {
	t.Helper()
	unpacked, err := Unpack(img, filepath.Join(t.TempDir(), "root"))
	if err != nil {
		t.Fatal(err)
	}
	if len(unpacked.Files) != 1 || unpacked.Files["/etcd-operator"] == "" {
		t.Fatalf("image files = %v, want /etcd-operator alone", unpacked.Files)
	}
	got, err := os.ReadFile(unpacked.Files["/etcd-operator"])
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("unpacked binary = %q, want %q", got, want)
	}
	if unpacked.User != User || len(unpacked.Entrypoint) != 1 {
		t.Errorf("unpacked config: user %q entrypoint %q", unpacked.User, unpacked.Entrypoint)
	}
}

// checkDockerArchive reads the tarball the way `docker load` does: manifest.json naming the tag.
func checkDockerArchive(t *testing.T, path string) {
	t.Helper()
	tag, err := name.NewTag("ghcr.io/quorumkeeper/etcd-operator:v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("docker archive %s: %v", path, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != "arm64" || cfg.Config.User != User {
		t.Errorf("docker archive config: arch %s user %q", cfg.Architecture, cfg.Config.User)
	}
}

func TestBuildRefusesNoBinary(t *testing.T) {
	if _, err := Build(Spec{}); err == nil {
		t.Fatal("Build with no binary succeeded")
	}
}
