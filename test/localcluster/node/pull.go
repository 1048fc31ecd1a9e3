package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// pullError is a failure to get an image (not in the map, not pullable, the registry said
// no): the container waits with reason ErrImagePull, as a kubelet's would.
type pullError struct{ err error }

func (e *pullError) Error() string { return e.err.Error() }
func (e *pullError) Unwrap() error { return e.err }

// imageConfigFile is where a pulled image's config (Image, with file paths relative to the
// root) is kept next to its root: written last, so a cache entry without it is incomplete.
const imageConfigFile = "image.json"

// puller pulls images from a registry on this machine's loopback (a test's own registry)
// into dir, one directory per manifest digest: <dir>/<hex>/root and <dir>/<hex>/image.json.
// It never dials anything else: the local cluster's network-safety rule.
type puller struct {
	dir      string
	platform v1.Platform
	// transport carries the registry's requests (nil: go-containerregistry's default); the
	// tests count them to show that a refused registry is never dialed.
	transport http.RoundTripper
}

func newPuller(dir string) puller {
	return puller{dir: dir, platform: v1.Platform{OS: "linux", Architecture: goruntime.GOARCH}}
}

// pull resolves ref (an index to this machine's platform), unpacks it unless the cache has
// it already, and returns the image and its ID (repository@digest, as a kubelet reports it).
func (p puller) pull(ctx context.Context, ref string) (Image, string, error) {
	r, err := loopbackReference(ref)
	if err != nil {
		return Image{}, "", err
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithPlatform(p.platform)}
	if p.transport != nil {
		opts = append(opts, remote.WithTransport(p.transport))
	}
	img, err := remote.Image(r, opts...)
	if err != nil {
		return Image{}, "", fmt.Errorf("pulling %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Image{}, "", fmt.Errorf("pulling %s: %w", ref, err)
	}
	entry := filepath.Join(p.dir, digest.Hex)
	local, err := loadPulled(entry)
	if errors.Is(err, os.ErrNotExist) {
		local, err = p.unpackInto(img, entry)
	}
	if err != nil {
		return Image{}, "", fmt.Errorf("pulling %s: %w", ref, err)
	}
	return local, r.Context().Name() + "@" + digest.String(), nil
}

// loopbackReference parses ref and refuses any registry that is not on the loopback, before
// anything is dialed. Plain HTTP: a test's registry has no certificate.
func loopbackReference(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return nil, err
	}
	if !isLoopbackHost(r.Context().RegistryStr()) {
		return nil, fmt.Errorf("image %q: the local cluster pulls only from a registry on this machine's loopback (127.0.0.1, localhost, [::1]), not %s", ref, r.Context().RegistryStr())
	}
	return r, nil
}

// isLoopbackHost says whether a registry's host[:port] is a loopback address or localhost.
func isLoopbackHost(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.IsLoopback()
}

// unpackInto unpacks img next to entry and moves it there in one rename, so that two agents
// pulling the same image at once never see half a root: the second rename fails and that
// agent takes the first one's.
func (p puller) unpackInto(img v1.Image, entry string) (Image, error) {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return Image{}, err
	}
	tmp, err := os.MkdirTemp(p.dir, "pulling-")
	if err != nil {
		return Image{}, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	local, err := unpackImage(img, filepath.Join(tmp, "root"))
	if err != nil {
		return Image{}, err
	}
	data, err := json.Marshal(local)
	if err != nil {
		return Image{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, imageConfigFile), data, 0o644); err != nil {
		return Image{}, err
	}
	if err := os.Rename(tmp, entry); err != nil {
		if _, statErr := os.Stat(filepath.Join(entry, imageConfigFile)); statErr != nil {
			return Image{}, err
		}
	}
	return loadPulled(entry)
}

// loadPulled reads a cache entry, its files made host paths under its root.
func loadPulled(entry string) (Image, error) {
	data, err := os.ReadFile(filepath.Join(entry, imageConfigFile))
	if err != nil {
		return Image{}, err
	}
	var img Image
	if err := json.Unmarshal(data, &img); err != nil {
		return Image{}, fmt.Errorf("image cache %s: %w", entry, err)
	}
	root := filepath.Join(entry, "root")
	for containerPath, rel := range img.Files {
		img.Files[containerPath] = filepath.Join(root, rel)
	}
	return img, nil
}
