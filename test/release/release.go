package release

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/quorumkeeper/etcd-operator/test/image"
)

// Default platforms: the image's are the nodes the operator runs on, the plugin's the
// machines people run kubectl on.
var (
	DefaultImagePlatforms  = []string{"linux/amd64", "linux/arm64"}
	DefaultPluginPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}
)

// DefaultDownloadURL is where the krew manifest's archives are downloaded from: the GitHub
// release of the tag VERSION, to which the archives are attached.
const DefaultDownloadURL = "https://github.com/quorumkeeper/etcd-operator/releases/download"

// Options says what to release.
type Options struct {
	Root       string // the repository's checkout
	Out        string // DIST
	Version    Version
	Repository name.Repository // IMAGE: the image is Repository:Version
	Revision   string          // the source's commit, for the image's labels
	Created    time.Time       // dates the image and every archive
	// ImagePlatforms and PluginPlatforms default to DefaultImagePlatforms and
	// DefaultPluginPlatforms.
	ImagePlatforms, PluginPlatforms []string
	DownloadURL                     string // defaults to DefaultDownloadURL
}

// Artifacts is what Run wrote.
type Artifacts struct {
	Layout  string // the OCI image layout (Out/oci)
	Install string // Out/install.yaml
	Chart   string // Out/NAME-VERSION.tgz
	Plugins []PluginArchive
	Krew    string // Out/plugins/etcd.yaml
}

// Names of what Run writes into Out, to clear a previous release's first: one release per Out.
var outputs = []string{"oci", "install.yaml", "plugins", "etcd-operator-*.tgz", "etcd-operator-*.tar", PluginBinary + "_*"}

// Run builds the binaries (into a temporary directory) and writes the release into o.Out.
func Run(ctx context.Context, o Options) (Artifacts, error) {
	o = o.withDefaults()
	if err := clearOutputs(o.Out); err != nil {
		return Artifacts{}, err
	}
	bin, err := os.MkdirTemp("", "release-bin-")
	if err != nil {
		return Artifacts{}, err
	}
	defer os.RemoveAll(bin)
	tag := o.Repository.Tag(o.Version.String())
	var a Artifacts
	if a.Layout, err = writeImage(ctx, o, tag, bin); err != nil {
		return Artifacts{}, err
	}
	if a.Install, err = writeInstall(o, tag); err != nil {
		return Artifacts{}, err
	}
	if a.Chart, err = PackageChart(filepath.Join(o.Root, "charts", "etcd-operator"), o.Version, o.Repository.Name(), o.Created, o.Out); err != nil {
		return Artifacts{}, err
	}
	if a.Plugins, err = writePlugins(ctx, o, bin); err != nil {
		return Artifacts{}, err
	}
	a.Krew, err = writeKrew(o, a.Plugins)
	return a, err
}

func (o Options) withDefaults() Options {
	if len(o.ImagePlatforms) == 0 {
		o.ImagePlatforms = DefaultImagePlatforms
	}
	if len(o.PluginPlatforms) == 0 {
		o.PluginPlatforms = DefaultPluginPlatforms
	}
	if o.DownloadURL == "" {
		o.DownloadURL = DefaultDownloadURL
	}
	if o.Created.IsZero() {
		o.Created = time.Now().UTC().Truncate(time.Second)
	}
	return o
}

func clearOutputs(out string) error {
	for _, pattern := range outputs {
		matches, err := filepath.Glob(filepath.Join(out, pattern))
		if err != nil {
			return err
		}
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				return err
			}
		}
	}
	return os.MkdirAll(filepath.Join(out, "plugins"), 0o755)
}

// writeImage builds the operator for each image platform and writes the image as make image
// does (test/image): the OCI layout and one docker archive per platform.
func writeImage(ctx context.Context, o Options, tag name.Tag, bin string) (string, error) {
	spec := image.Spec{Binaries: map[string]string{}, Version: o.Version.String(), Revision: o.Revision, Created: o.Created}
	for _, p := range o.ImagePlatforms {
		out := filepath.Join(bin, filepath.FromSlash(p), "etcd-operator")
		if err := goBuild(ctx, o.Root, "./cmd/etcd-operator", p, o.Version, out); err != nil {
			return "", err
		}
		spec.Binaries[p] = out
	}
	idx, err := image.Build(spec)
	if err != nil {
		return "", err
	}
	written, err := image.Write(o.Out, tag.Name(), idx)
	return written.Layout, err
}

func writeInstall(o Options, tag name.Tag) (string, error) {
	install, err := RenderInstall(filepath.Join(o.Root, "config"), tag)
	if err != nil {
		return "", err
	}
	path := filepath.Join(o.Out, "install.yaml")
	return path, os.WriteFile(path, install, 0o644)
}

func writePlugins(ctx context.Context, o Options, bin string) ([]PluginArchive, error) {
	archives := make([]PluginArchive, 0, len(o.PluginPlatforms))
	for _, p := range o.PluginPlatforms {
		out := filepath.Join(bin, "plugin", filepath.FromSlash(p), PluginBinary)
		if err := goBuild(ctx, o.Root, "./cmd/kubectl-etcd", p, o.Version, out); err != nil {
			return nil, err
		}
		a, err := ArchivePlugin(out, filepath.Join(o.Root, "LICENSE"), p, o.Created, o.Out)
		if err != nil {
			return nil, fmt.Errorf("plugin archive for %s: %w", p, err)
		}
		archives = append(archives, a)
	}
	return archives, nil
}

func writeKrew(o Options, archives []PluginArchive) (string, error) {
	template, err := os.ReadFile(filepath.Join(o.Root, "plugins", "etcd.yaml"))
	if err != nil {
		return "", err
	}
	manifest, err := KrewManifest(template, o.Version, archives, o.DownloadURL)
	if err != nil {
		return "", err
	}
	path := filepath.Join(o.Out, "plugins", "etcd.yaml")
	return path, os.WriteFile(path, manifest, 0o644)
}
