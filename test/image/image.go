// Package image assembles the operator's OCI image from static binaries, without a container
// daemon: one layer holding the binary alone (no shell, no libc: the binary is static), a
// config that runs it as a non-root user, and an index over every platform. It also unpacks
// such an image into a directory, which is how the local cluster runs the operator from it.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BinaryPath is where the operator's binary sits in the image, and the entrypoint.
const BinaryPath = "/etcd-operator"

// User is the image's user: numeric, so that no /etc/passwd is needed and Kubernetes'
// runAsNonRoot can check it ("nonroot" of distroless images).
const User = "65532:65532"

// Spec says what to build.
type Spec struct {
	// Binaries maps a platform ("linux/amd64") to the host path of its static binary.
	Binaries map[string]string
	// Version goes into the labels; the binary carries it too (--version).
	Version string
	// Revision is the source's commit, when known.
	Revision string
	// Created is the time written into the config and the layer's files (reproducible builds
	// pass SOURCE_DATE_EPOCH).
	Created time.Time
}

// Created is SOURCE_DATE_EPOCH when set (reproducible builds), else now: the date of an
// image and of the archives released with it.
func Created() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(sec, 0).UTC()
		}
	}
	return time.Now().UTC().Truncate(time.Second)
}

// Labels are the image's labels: the OCI annotation keys, and the version as Kubernetes
// objects label it.
func (s Spec) Labels() map[string]string {
	labels := map[string]string{
		"org.opencontainers.image.title":       "etcd-operator",
		"org.opencontainers.image.description": "Kubernetes operator for etcd clusters",
		"org.opencontainers.image.source":      "https://github.com/quorumkeeper/etcd-operator",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.created":     s.Created.UTC().Format(time.RFC3339),
		"app.kubernetes.io/version":            s.Version,
	}
	if s.Revision != "" {
		labels["org.opencontainers.image.revision"] = s.Revision
	}
	return labels
}

// Build returns the multi-platform index, platforms in sorted order.
func Build(s Spec) (v1.ImageIndex, error) {
	if len(s.Binaries) == 0 {
		return nil, fmt.Errorf("no binary given: pass at least one platform=path")
	}
	platforms := make([]string, 0, len(s.Binaries))
	for p := range s.Binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		platform, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", p, err)
		}
		img, err := buildOne(s, *platform, s.Binaries[p])
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: platform},
		})
	}
	return idx, nil
}

func buildOne(s Spec, platform v1.Platform, binary string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	layerTar, err := binaryLayer(data, s.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = platform.OS, platform.Architecture, platform.Variant
	cfg.Created = v1.Time{Time: s.Created}
	cfg.Config = v1.Config{
		User:       User,
		Entrypoint: []string{BinaryPath},
		WorkingDir: "/",
		Labels:     s.Labels(),
	}
	return mutate.ConfigFile(img, cfg)
}

// binaryLayer is a tar with the binary alone, owned by root and not writable by the user
// that runs it.
func binaryLayer(binary []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Name:     BinaryPath[1:],
		Mode:     0o755,
		Size:     int64(len(binary)),
		ModTime:  mtime,
		Typeflag: tar.TypeReg,
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
