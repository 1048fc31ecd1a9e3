package node

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
)

// entry is one file of a test layer: a regular file (body), a directory (dir) or a symlink
// (link).
type entry struct {
	name, body, link string
	dir              bool
}

func layer(t *testing.T, entries ...entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		switch {
		case e.dir:
			hdr = &tar.Header{Name: e.name, Mode: 0o755, Typeflag: tar.TypeDir}
		case e.link != "":
			hdr = &tar.Header{Name: e.name, Linkname: e.link, Mode: 0o777, Typeflag: tar.TypeSymlink}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func imageOf(t *testing.T, cfg v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	file, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	file = file.DeepCopy()
	file.OS, file.Architecture = "linux", goruntime.GOARCH
	img, err = mutate.ConfigFile(img, file)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// testRegistry is an in-process registry on 127.0.0.1, as a test's own registry would be.
func testRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func push(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
}

// pushIndex pushes img for this machine's platform in an index with a random image for
// another platform before it, as a multi-platform release does.
func pushIndex(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	other, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	otherArch := "s390x"
	if goruntime.GOARCH == otherArch {
		otherArch = "ppc64le"
	}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: otherArch}}},
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: goruntime.GOARCH}}},
	)
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
}

func TestAPulledImageIsItsFlattenedLayersAndItsConfig(t *testing.T) {
	host := testRegistry(t)
	cfg := v1.Config{Entrypoint: []string{"/bin/app"}, Cmd: []string{"--serve"}, Env: []string{"A=1"}, User: "65532:65532", WorkingDir: "/work"}
	img := imageOf(t, cfg,
		layer(t, entry{name: "bin", dir: true}, entry{name: "bin/app", body: "app v1"}, entry{name: "etc/gone", body: "x"},
			entry{name: "bin/sh", link: "/bin/app"}, entry{name: "sbin", link: "bin"}),
		layer(t, entry{name: "etc/.wh.gone"}, entry{name: "etc/kept", body: "kept"}),
	)
	pushIndex(t, host+"/app:v1", img)

	dir := t.TempDir()
	got, id, err := newPuller(dir).pull(context.Background(), host+"/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := img.Digest()
	if want := host + "/app@" + digest.String(); id != want {
		t.Errorf("image ID %s, want %s (this platform's manifest)", id, want)
	}
	root := filepath.Join(dir, digest.Hex, "root")
	wantFiles := map[string]string{
		"/bin/app": filepath.Join(root, "bin/app"), "/etc/kept": filepath.Join(root, "etc/kept"),
		"/bin/sh": filepath.Join(root, "bin/app"), "/sbin": filepath.Join(root, "bin"),
	}
	if !reflect.DeepEqual(got.Files, wantFiles) {
		t.Errorf("files %v, want %v", got.Files, wantFiles)
	}
	if body, err := os.ReadFile(got.Files["/bin/app"]); err != nil || string(body) != "app v1" {
		t.Errorf("/bin/app holds %q (%v), want the layer's content", body, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/etc/gone is in the root (%v): the later layer's whiteout removes it", err)
	}
	wantCfg := Image{Files: got.Files, Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd, Env: cfg.Env, User: cfg.User, WorkingDir: cfg.WorkingDir}
	if !reflect.DeepEqual(got, wantCfg) {
		t.Errorf("image %+v, want the config %+v", got, wantCfg)
	}
}

func TestAnImageTheRegistryDoesNotHaveIsErrImagePull(t *testing.T) {
	images := filepath.Join(t.TempDir(), "images.yaml")
	if err := os.WriteFile(images, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &provider{cfg: Config{ImagesFile: images, PullDir: t.TempDir()}}
	_, _, err := p.image(context.Background(), testRegistry(t)+"/nope:v1")
	if err == nil {
		t.Fatal("pulled an image the registry does not have")
	}
	if reason := startFailureReason(err); reason != "ErrImagePull" {
		t.Errorf("reason %s (%v), want ErrImagePull", reason, err)
	}
}

// countingTransport counts the requests it is given, and makes none.
type countingTransport struct{ calls atomic.Int32 }

func (c *countingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return nil, errors.New("no network in this test")
}

func TestARegistryOffTheLoopbackIsRefusedUndialed(t *testing.T) {
	for _, ref := range []string{"quay.io/coreos/etcd:v3.6.16", "10.213.0.1:5000/app:v1", "busybox", "localhost.example.com/app:v1"} {
		transport := &countingTransport{}
		p := newPuller(t.TempDir())
		p.transport = transport
		if _, _, err := p.pull(context.Background(), ref); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("pull %s: %v, want a refusal naming the loopback", ref, err)
		}
		if n := transport.calls.Load(); n != 0 {
			t.Errorf("pull %s made %d requests, want none", ref, n)
		}
	}
}

func TestLoopbackRegistryHosts(t *testing.T) {
	for registryHost, want := range map[string]bool{
		"127.0.0.1:5000": true, "127.0.0.1": true, "127.3.2.1:80": true, "localhost:5000": true, "localhost": true,
		"[::1]:5000": true, "[::1]": true, "10.213.0.1:5000": false, "index.docker.io": false,
		"localhost.example.com": false, "[::2]:5000": false,
	} {
		if got := isLoopbackHost(registryHost); got != want {
			t.Errorf("isLoopbackHost(%q) = %v, want %v", registryHost, got, want)
		}
	}
}

func TestALayerEntryLeavingTheRootIsRefused(t *testing.T) {
	outside := t.TempDir()
	cases := map[string]v1.Layer{
		"a .. element":         layer(t, entry{name: "../escaped", body: "x"}),
		"a .. inside the name": layer(t, entry{name: "bin/../../escaped", body: "x"}),
		// mutate.Extract drops what a layer has under a link it has already seen, so the
		// entries under the link come first.
		"a file under a symlink to outside": layer(t,
			entry{name: "out/escaped", body: "x"}, entry{name: "out", link: outside}),
		"a symlink under a symlink to outside": layer(t,
			entry{name: "out/escaped", link: "x"}, entry{name: "out", link: outside}),
	}
	for what, l := range cases {
		root := filepath.Join(t.TempDir(), "cache", "root")
		if _, err := unpackImage(imageOf(t, v1.Config{}, l), root); err == nil {
			t.Errorf("%s: unpacked, want a refusal", what)
		}
		for _, dir := range []string{outside, filepath.Dir(root), filepath.Dir(filepath.Dir(root))} {
			if _, err := os.Lstat(filepath.Join(dir, "escaped")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: wrote %s outside the root", what, filepath.Join(dir, "escaped"))
			}
		}
	}
}

func TestSymlinksResolveInsideTheImage(t *testing.T) {
	links := map[string]string{
		"/bin": "usr/bin", "/usr/bin/sh": "busybox", "/abs": "/usr/bin/busybox",
		"/up": "../../../usr", "/loop": "/loop2", "/loop2": "/loop",
	}
	for p, want := range map[string]string{
		"/bin/sh": "/usr/bin/busybox", "/abs": "/usr/bin/busybox", "/up/bin": "/usr/bin", "/plain/file": "/plain/file",
	} {
		if got, err := resolveInRoot(links, p); err != nil || got != want {
			t.Errorf("resolveInRoot(%s) = %s, %v; want %s", p, got, err, want)
		}
	}
	if _, err := resolveInRoot(links, "/loop"); err == nil {
		t.Error("a symlink loop resolved")
	}
}

func TestTheImageUserIsTheDefaultIdentity(t *testing.T) {
	podUser, ctrUser := int64(1000), int64(2000)
	plain := &corev1.Pod{}
	withPodUser := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsUser: &podUser}}}
	ctr := &corev1.Container{}
	ctrWithUser := &corev1.Container{SecurityContext: &corev1.SecurityContext{RunAsUser: &ctrUser}}
	cases := []struct {
		pod              *corev1.Pod
		ctr              *corev1.Container
		imageUser        string
		wantUID, wantGID int
		wantErr          bool
	}{
		{plain, ctr, "", 0, 0, false},
		{plain, ctr, "65532:65532", 65532, 65532, false},
		{plain, ctr, "65532", 65532, 0, false},
		{plain, ctr, "nonroot", 0, 0, true},
		{withPodUser, ctr, "nonroot", 1000, 0, false},
		{plain, ctrWithUser, "65532:65532", 2000, 0, false},
	}
	for _, c := range cases {
		uid, gid, _, err := identity(c.pod, c.ctr, c.imageUser)
		if (err != nil) != c.wantErr || uid != c.wantUID || gid != c.wantGID {
			t.Errorf("identity(image user %q) = %d:%d, %v; want %d:%d, error %v", c.imageUser, uid, gid, err, c.wantUID, c.wantGID, c.wantErr)
		}
	}
}

func TestAPulledImageIsUnpackedOnce(t *testing.T) {
	host := testRegistry(t)
	push(t, host+"/app:v1", imageOf(t, v1.Config{Entrypoint: []string{"/app"}}, layer(t, entry{name: "app", body: "v1"})))
	dir := t.TempDir()
	first, _, err := newPuller(dir).pull(context.Background(), host+"/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(first.Files["/app"], []byte("marked"), 0o644); err != nil {
		t.Fatal(err)
	}
	second, _, err := newPuller(dir).pull(context.Background(), host+"/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := os.ReadFile(second.Files["/app"]); string(body) != "marked" {
		t.Errorf("the second pull unpacked again (%q), want the cached root", body)
	}
}
