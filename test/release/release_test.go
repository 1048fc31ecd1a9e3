package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/quorumkeeper/etcd-operator/test/image"
)

const (
	testVersion = "v0.3.0"
	testImage   = "registry.example/etcd-operator"
)

// testPlatforms are the platforms the test builds: this machine's alone (one operator and one
// plugin binary, the build being the test's cost), or every default with
// RELEASE_TEST_PLATFORMS=all. The checks are the same either way.
func testPlatforms(defaults []string, host string) []string {
	if os.Getenv("RELEASE_TEST_PLATFORMS") == "all" {
		return defaults
	}
	return []string{host}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestReleaseFitsTogetherAndPushes makes a release as make release does, checks that every
// artifact names the same version and image, then pushes it to a registry and pulls it back.
func TestReleaseFitsTogetherAndPushes(t *testing.T) {
	v, err := ParseVersion(testVersion)
	if err != nil {
		t.Fatal(err)
	}
	repo, err := ParseRepository(testImage, false)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	// A previous release's files, which must not survive into this one.
	stale := []string{"etcd-operator-0.2.0.tgz", "kubectl-etcd_linux_s390x.tar.gz", "kubectl-etcd_linux_s390x.tar.gz.sha256"}
	for _, f := range stale {
		if err := os.WriteFile(filepath.Join(out, f), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{
		Root: repoRoot(t), Out: out, Version: v, Repository: repo, Revision: "abc123", Created: time.Unix(1700000000, 0).UTC(),
		ImagePlatforms:  testPlatforms(DefaultImagePlatforms, "linux/"+runtime.GOARCH),
		PluginPlatforms: testPlatforms(DefaultPluginPlatforms, runtime.GOOS+"/"+runtime.GOARCH),
	}
	a, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range stale {
		if _, err := os.Stat(filepath.Join(out, f)); err == nil {
			t.Errorf("%s of an earlier release is still in DIST", f)
		}
	}
	checkChart(t, a.Chart)
	checkInstallYAML(t, a.Install)
	checkImage(t, a.Layout, o.ImagePlatforms)
	checkKrew(t, a.Krew, out, o.PluginPlatforms)
	checkPush(t, out, v, repo, a)
}

func checkChart(t *testing.T, path string) {
	t.Helper()
	if filepath.Base(path) != "etcd-operator-0.3.0.tgz" {
		t.Errorf("chart archive %s, want etcd-operator-0.3.0.tgz", path)
	}
	files := untar(t, path)
	meta := map[string]any{}
	if err := yaml.Unmarshal(files["etcd-operator/Chart.yaml"], &meta); err != nil {
		t.Fatal(err)
	}
	if meta["version"] != "0.3.0" || meta["appVersion"] != testVersion {
		t.Errorf("Chart.yaml version %v, appVersion %v; want 0.3.0 and %s", meta["version"], meta["appVersion"], testVersion)
	}
	var values struct {
		Image struct{ Repository, Tag string }
	}
	if err := yaml.Unmarshal(files["etcd-operator/values.yaml"], &values); err != nil {
		t.Fatal(err)
	}
	if values.Image.Repository != testImage || values.Image.Tag != "" {
		t.Errorf("the chart's image is %s:%s, want %s and the tag from appVersion", values.Image.Repository, values.Image.Tag, testImage)
	}
	source, err := os.ReadFile(filepath.Join(repoRoot(t), "charts", "etcd-operator", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.Replace(source, []byte(" "+SourceImage), []byte(" "+testImage), 1); !bytes.Equal(files["etcd-operator/values.yaml"], want) {
		t.Errorf("the chart's values.yaml differs from the checkout's by more than the image repository (comments lost?)")
	}
	for _, f := range []string{"etcd-operator/templates/deployment.yaml", "etcd-operator/crds/etcd-operator.cozystack.io_etcdclusters.yaml"} {
		if _, ok := files[f]; !ok {
			t.Errorf("the chart archive lacks %s", f)
		}
	}
}

func checkInstallYAML(t *testing.T, path string) {
	t.Helper()
	install, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ManagerImage(install); err != nil || got != testImage+":"+testVersion {
		t.Errorf("install.yaml's manager image = %q (%v), want %s:%s", got, err, testImage, testVersion)
	}
	for _, kind := range []string{"kind: CustomResourceDefinition", "kind: ClusterRole", "kind: Namespace"} {
		if !bytes.Contains(install, []byte(kind)) {
			t.Errorf("install.yaml has no %s", kind)
		}
	}
	if bytes.Contains(install, []byte("-dirty")) || bytes.Contains(install, []byte("etcd-operator:dev")) {
		t.Errorf("install.yaml names a development build")
	}
}

func checkImage(t *testing.T, dir string, platforms []string) {
	t.Helper()
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != testVersion {
		t.Errorf("the layout's index.json = %+v, want one index tagged %s", top.Manifests, testVersion)
	}
	for _, p := range platforms {
		img, err := image.FromLayout(dir, p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != testVersion {
			t.Errorf("%s: label org.opencontainers.image.version = %q, want %s", p, got, testVersion)
		}
		if err := nonRoot(cfg.Config.User); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		if p == runtime.GOOS+"/"+runtime.GOARCH {
			checkBinaryVersion(t, img)
		}
	}
}

// nonRoot refuses an image user that is root or unset (which runs as root).
func nonRoot(user string) error {
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" {
		return fmt.Errorf("the image runs as %q: root", user)
	}
	return nil
}

// checkBinaryVersion runs the image's binary: it must say the release's version.
func checkBinaryVersion(t *testing.T, img v1.Image) {
	t.Helper()
	u, err := image.Unpack(img, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(u.Files[image.BinaryPath], "--version").Output()
	if err != nil || strings.TrimSpace(string(got)) != testVersion {
		t.Errorf("etcd-operator --version = %q (%v), want %s", got, err, testVersion)
	}
}

func checkKrew(t *testing.T, path, out string, platforms []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		Metadata struct{ Name string }
		Spec     struct {
			Version   string
			Platforms []struct {
				Selector struct{ MatchLabels map[string]string } `json:"selector"`
				URI      string                                  `json:"uri"`
				SHA256   string                                  `json:"sha256"`
				Bin      string                                  `json:"bin"`
			}
		}
	}
	if err := yaml.Unmarshal(data, &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.Metadata.Name != "etcd" || manifest.Spec.Version != testVersion {
		t.Errorf("krew manifest %s version %s, want etcd %s", manifest.Metadata.Name, manifest.Spec.Version, testVersion)
	}
	var got []string
	for _, p := range manifest.Spec.Platforms {
		platform := p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]
		got = append(got, platform)
		archive := pluginArchiveName(platform)
		if want := DefaultDownloadURL + "/" + testVersion + "/" + archive; p.URI != want {
			t.Errorf("%s: uri %s, want %s", platform, p.URI, want)
		}
		if err := checkSum(filepath.Join(out, archive), p.SHA256); err != nil {
			t.Errorf("%s: %v", platform, err)
		}
		if mode := untarModes(t, filepath.Join(out, archive))[p.Bin]; mode&0o111 == 0 {
			t.Errorf("%s: the archive has no executable %s (mode %o)", platform, p.Bin, mode)
		}
	}
	if !slices.Equal(got, platforms) {
		t.Errorf("krew platforms %v, want %v", got, platforms)
	}
}

// checkSum checks that the file's SHA-256 is want, and that its .sha256 file says so.
func checkSum(path, want string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("%s has SHA-256 %s, the manifest says %s", path, got, want)
	}
	line, err := os.ReadFile(path + ".sha256")
	if err != nil {
		return err
	}
	if wantLine := want + "  " + filepath.Base(path) + "\n"; string(line) != wantLine {
		return fmt.Errorf("%s.sha256 = %q, want %q", path, line, wantLine)
	}
	return nil
}

// toServer sends every request to the test registry, whatever host the reference names: the
// release is pushed to the very references it was made for.
type toServer struct{ host string }

func (s toServer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = "http", s.host
	return http.DefaultTransport.RoundTrip(r)
}

func checkPush(t *testing.T, out string, v Version, repo name.Repository, a Artifacts) {
	t.Helper()
	server := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer server.Close()
	remoteOpts := []remote.Option{remote.WithTransport(toServer{host: strings.TrimPrefix(server.URL, "http://")})}
	o := PushOptions{Dist: out, Version: v, Repository: repo, Charts: ChartRepository(repo), Remote: remoteOpts}

	other, _ := ParseVersion("v0.3.1")
	wrong := o
	wrong.Version = other
	if _, err := Push(context.Background(), wrong); err == nil || !strings.Contains(err.Error(), "install.yaml names the image") {
		t.Errorf("pushing DIST of %s as v0.3.1: %v, want refused", v, err)
	}

	pushed, err := Push(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkPulledImage(t, a.Layout, pushed, remoteOpts)
	checkPulledChart(t, a.Chart, pushed, remoteOpts)
}

func checkPulledImage(t *testing.T, dir string, pushed Pushed, opts []remote.Option) {
	t.Helper()
	if pushed.Image.Name() != testImage+":"+testVersion {
		t.Errorf("image pushed to %s, want %s:%s", pushed.Image, testImage, testVersion)
	}
	idx, err := image.Index(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Get(pushed.Image, opts...)
	if err != nil {
		t.Fatalf("pull %s: %v", pushed.Image, err)
	}
	if got.Digest != want || pushed.ImageDigest != want || !got.MediaType.IsIndex() {
		t.Errorf("%s is %s %s (push said %s), want the layout's index %s", pushed.Image, got.MediaType, got.Digest, pushed.ImageDigest, want)
	}
}

func checkPulledChart(t *testing.T, archive string, pushed Pushed, opts []remote.Option) {
	t.Helper()
	if pushed.Chart.Name() != "registry.example/charts/etcd-operator:0.3.0" {
		t.Errorf("chart pushed to %s, want registry.example/charts/etcd-operator:0.3.0", pushed.Chart)
	}
	img, err := remote.Image(pushed.Chart, opts...)
	if err != nil {
		t.Fatalf("pull %s: %v", pushed.Chart, err)
	}
	manifest, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if manifest.Config.MediaType != HelmConfigMediaType || len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != HelmChartMediaType {
		t.Fatalf("chart manifest: config %s, layers %v; want %s and one %s", manifest.Config.MediaType, manifest.Layers, HelmConfigMediaType, HelmChartMediaType)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(config, []byte(`"version":"0.3.0"`)) || !bytes.Contains(config, []byte(`"name":"etcd-operator"`)) {
		t.Errorf("chart config %s, want etcd-operator at 0.3.0", config)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	got := readLayer(t, layers[0])
	want, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the pulled chart (%d bytes) differs from %s (%d bytes)", len(got), archive, len(want))
	}
}

func readLayer(t *testing.T, l v1.Layer) []byte {
	t.Helper()
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// untar reads a .tar.gz's files by name.
func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	walkTarGz(t, path, func(h *tar.Header, r io.Reader) {
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = data
	})
	return files
}

// untarModes reads a .tar.gz's file modes by name.
func untarModes(t *testing.T, path string) map[string]int64 {
	t.Helper()
	modes := map[string]int64{}
	walkTarGz(t, path, func(h *tar.Header, _ io.Reader) { modes[h.Name] = h.Mode })
	return modes
}

func walkTarGz(t *testing.T, path string, each func(*tar.Header, io.Reader)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		each(h, tr)
	}
}
