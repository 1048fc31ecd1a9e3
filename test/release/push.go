package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"

	"github.com/quorumkeeper/etcd-operator/test/image"
)

// The media types of a Helm chart stored in an OCI registry (what helm push writes and
// helm pull and helm install oci:// read).
const (
	HelmConfigMediaType types.MediaType = "application/vnd.cncf.helm.config.v1+json"
	HelmChartMediaType  types.MediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// PushOptions says what to push where.
type PushOptions struct {
	Dist       string // what Run wrote
	Version    Version
	Repository name.Repository // the image's: Repository:Version
	// Charts is the repository the chart goes under, as helm push oci://Charts does: the
	// chart is Charts/NAME:CHART_VERSION.
	Charts name.Repository
	Remote []remote.Option // credentials, transport
}

// Pushed is where Push put the release, with the digests the registry now serves.
type Pushed struct {
	Image, Chart             name.Tag
	ImageDigest, ChartDigest v1.Hash
}

// Push pushes the image (the OCI layout's index, every platform) and the chart of a release
// that Run wrote with the same version and repository; a Dist written for another version
// or image is refused, so what install.yaml names is what gets pushed.
func Push(ctx context.Context, o PushOptions) (Pushed, error) {
	opts := append([]remote.Option{remote.WithContext(ctx)}, o.Remote...)
	imageTag := o.Repository.Tag(o.Version.String())
	if err := checkInstall(o.Dist, imageTag); err != nil {
		return Pushed{}, err
	}
	idx, err := image.Index(filepath.Join(o.Dist, "oci"))
	if err != nil {
		return Pushed{}, err
	}
	p := Pushed{Image: imageTag}
	if p.ImageDigest, err = idx.Digest(); err != nil {
		return Pushed{}, err
	}
	if err := remote.WriteIndex(imageTag, idx, opts...); err != nil {
		return Pushed{}, fmt.Errorf("push %s: %w", imageTag, err)
	}
	p.Chart, p.ChartDigest, err = pushChart(o, opts)
	return p, err
}

// checkInstall refuses a Dist whose install.yaml names another image than the one pushed.
func checkInstall(dist string, want name.Tag) error {
	install, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
	if err != nil {
		return fmt.Errorf("%w: run make release with the same VERSION and IMAGE first", err)
	}
	got, err := ManagerImage(install)
	if err != nil {
		return err
	}
	if got != want.Name() {
		return fmt.Errorf("%s/install.yaml names the image %s, not %s: run make release with the same VERSION and IMAGE first", dist, got, want.Name())
	}
	return nil
}

// pushChart pushes Dist's chart of the version as helm push would.
func pushChart(o PushOptions, opts []remote.Option) (name.Tag, v1.Hash, error) {
	matches, err := filepath.Glob(filepath.Join(o.Dist, "*-"+o.Version.Chart()+".tgz"))
	if err != nil {
		return name.Tag{}, v1.Hash{}, err
	}
	if len(matches) != 1 {
		return name.Tag{}, v1.Hash{}, fmt.Errorf("want one chart NAME-%s.tgz in %s, found %v", o.Version.Chart(), o.Dist, matches)
	}
	archive, err := os.ReadFile(matches[0])
	if err != nil {
		return name.Tag{}, v1.Hash{}, err
	}
	meta, err := archivedChartMetadata(archive)
	if err != nil {
		return name.Tag{}, v1.Hash{}, fmt.Errorf("%s: %w", matches[0], err)
	}
	if meta.Version != o.Version.Chart() {
		return name.Tag{}, v1.Hash{}, fmt.Errorf("%s is version %s, want %s", matches[0], meta.Version, o.Version.Chart())
	}
	tag := o.Charts.Registry.Repo(o.Charts.RepositoryStr(), meta.Name).Tag(meta.Version)
	digest, err := pushArtifact(tag, meta, archive, opts)
	return tag, digest, err
}

// archivedChart is what a chart archive's Chart.yaml says, and when it was packaged.
type archivedChart struct {
	chartFields
	Created time.Time
	// JSON is Chart.yaml as JSON: the config of the chart's OCI manifest.
	JSON []byte
}

// chartFields are the fields of Chart.yaml that a push reads.
type chartFields struct {
	Name, Version, Description string
}

// archivedChartMetadata reads NAME/Chart.yaml from a chart archive.
func archivedChartMetadata(archive []byte) (archivedChart, error) {
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return archivedChart{}, err
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return archivedChart{}, errors.New("no Chart.yaml in the archive")
		}
		if err != nil {
			return archivedChart{}, err
		}
		if _, file, _ := strings.Cut(hdr.Name, "/"); file != "Chart.yaml" {
			continue
		}
		chartYAML, err := io.ReadAll(tr)
		if err != nil {
			return archivedChart{}, err
		}
		meta := archivedChart{Created: hdr.ModTime.UTC()}
		if meta.JSON, err = yaml.YAMLToJSON(chartYAML); err != nil {
			return archivedChart{}, err
		}
		return meta, json.Unmarshal(meta.JSON, &meta.chartFields)
	}
}

// pushArtifact writes the chart's two blobs and then its manifest, as helm push does.
func pushArtifact(tag name.Tag, meta archivedChart, archive []byte, opts []remote.Option) (v1.Hash, error) {
	config := static.NewLayer(meta.JSON, HelmConfigMediaType)
	chart := static.NewLayer(archive, HelmChartMediaType)
	manifest := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Annotations: map[string]string{
			"org.opencontainers.image.title":       meta.Name,
			"org.opencontainers.image.version":     meta.Version,
			"org.opencontainers.image.description": meta.Description,
			"org.opencontainers.image.created":     meta.Created.Format(time.RFC3339),
		},
	}
	for _, blob := range []v1.Layer{config, chart} {
		if err := remote.WriteLayer(tag.Context(), blob, opts...); err != nil {
			return v1.Hash{}, fmt.Errorf("push a blob of %s: %w", tag, err)
		}
	}
	configDesc, err := partial.Descriptor(config)
	if err != nil {
		return v1.Hash{}, err
	}
	chartDesc, err := partial.Descriptor(chart)
	if err != nil {
		return v1.Hash{}, err
	}
	manifest.Config, manifest.Layers = *configDesc, []v1.Descriptor{*chartDesc}
	raw, err := json.Marshal(manifest)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Put(tag, rawManifest{raw: raw, mediaType: manifest.MediaType}, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", tag, err)
	}
	digest, _, err := v1.SHA256(bytes.NewReader(raw))
	return digest, err
}

// rawManifest is a manifest as remote.Put takes it, with its media type for Content-Type.
type rawManifest struct {
	raw       []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }
