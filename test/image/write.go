package image

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// refNameAnnotation names an image in an OCI layout's index.json (what `skopeo copy
// oci:DIR:TAG` and `crane` read).
const refNameAnnotation = "org.opencontainers.image.ref.name"

// Written says where Write put the image.
type Written struct {
	// Layout is the OCI image layout directory holding the multi-platform index.
	Layout string
	// Tarballs maps each platform to a `docker load` tarball of that platform's image
	// (the docker archive format holds one image per tag, so one file per platform).
	Tarballs map[string]string
}

// Write stores idx under dir as an OCI layout (dir/oci) tagged ref, and one docker archive per
// platform (dir/etcd-operator-<os>-<arch>.tar). dir/oci is replaced, not appended to.
func Write(dir, ref string, idx v1.ImageIndex) (Written, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return Written{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	out := Written{Layout: filepath.Join(dir, "oci"), Tarballs: map[string]string{}}
	if err := os.RemoveAll(out.Layout); err != nil {
		return Written{}, err
	}
	p, err := layout.Write(out.Layout, empty.Index)
	if err != nil {
		return Written{}, err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: tag.TagStr()})); err != nil {
		return Written{}, err
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		return Written{}, err
	}
	for _, desc := range manifest.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return Written{}, err
		}
		platform := desc.Platform.String()
		file := filepath.Join(dir, "etcd-operator-"+strings.ReplaceAll(platform, "/", "-")+".tar")
		if err := tarball.WriteToFile(file, tag, img); err != nil {
			return Written{}, fmt.Errorf("docker archive for %s: %w", platform, err)
		}
		out.Tarballs[platform] = file
	}
	return out, nil
}

// FromLayout reads the platform's image from an OCI layout that Write made.
func FromLayout(dir, platform string) (v1.Image, error) {
	want, err := v1.ParsePlatform(platform)
	if err != nil {
		return nil, err
	}
	idx, err := Index(dir)
	if err != nil {
		return nil, err
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, desc := range manifest.Manifests {
		if desc.Platform != nil && desc.Platform.Satisfies(*want) {
			return idx.Image(desc.Digest)
		}
	}
	return nil, fmt.Errorf("%s has no image for %s", dir, platform)
}

// Index is the multi-platform index that Write put in an OCI layout.
func Index(dir string) (v1.ImageIndex, error) {
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	manifest, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(manifest.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d entries, want the one index Write makes", dir, len(manifest.Manifests))
	}
	return top.ImageIndex(manifest.Manifests[0].Digest)
}
