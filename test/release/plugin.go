package release

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// PluginBinary is the plugin's executable name, in its archives and in the krew manifest.
const PluginBinary = "kubectl-etcd"

// PluginArchive is one platform's archive of the plugin.
type PluginArchive struct {
	Platform string // "darwin/arm64"
	Path     string // OUT/kubectl-etcd_darwin_arm64.tar.gz
	SHA256   string // hex, also in Path + ".sha256"
}

// pluginArchiveName is the archive's file name for a platform: kubectl-etcd_OS_ARCH.tar.gz.
func pluginArchiveName(platform string) string {
	return PluginBinary + "_" + strings.ReplaceAll(platform, "/", "_") + ".tar.gz"
}

// ArchivePlugin writes the binary and the license as a .tar.gz for platform into outDir, and
// beside it its SHA-256 in sha256sum's format (`sha256sum -c` checks a download with it).
func ArchivePlugin(binary, license, platform string, mtime time.Time, outDir string) (PluginArchive, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return PluginArchive{}, err
	}
	lic, err := os.ReadFile(license)
	if err != nil {
		return PluginArchive{}, err
	}
	archive, err := writeTarGzip([]tarEntry{
		{name: PluginBinary, mode: 0o755, data: bin},
		{name: "LICENSE", mode: 0o644, data: lic},
	}, mtime)
	if err != nil {
		return PluginArchive{}, err
	}
	sum := sha256.Sum256(archive)
	a := PluginArchive{Platform: platform, Path: filepath.Join(outDir, pluginArchiveName(platform)), SHA256: hex.EncodeToString(sum[:])}
	if err := os.WriteFile(a.Path, archive, 0o644); err != nil {
		return PluginArchive{}, err
	}
	line := fmt.Sprintf("%s  %s\n", a.SHA256, filepath.Base(a.Path))
	return a, os.WriteFile(a.Path+".sha256", []byte(line), 0o644)
}

// KrewManifest is the krew manifest template (plugins/etcd.yaml: what does not change from
// one release to the next) with the release's version and one platform per archive, each
// downloaded from downloadURL/VERSION/ARCHIVE.
func KrewManifest(template []byte, v Version, archives []PluginArchive, downloadURL string) ([]byte, error) {
	manifest := map[string]any{}
	if err := yaml.Unmarshal(template, &manifest); err != nil {
		return nil, fmt.Errorf("krew manifest template: %w", err)
	}
	spec, ok := manifest["spec"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("krew manifest template has no spec")
	}
	platforms := make([]any, 0, len(archives))
	for _, a := range archives {
		goos, goarch, _ := strings.Cut(a.Platform, "/")
		platforms = append(platforms, map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"os": goos, "arch": goarch}},
			"uri":      strings.TrimSuffix(downloadURL, "/") + "/" + v.String() + "/" + filepath.Base(a.Path),
			"sha256":   a.SHA256,
			"bin":      PluginBinary,
		})
	}
	spec["version"] = v.String()
	spec["platforms"] = platforms
	out, err := yaml.Marshal(manifest)
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# krew plugin manifest for kubectl etcd %s, written by make release from plugins/etcd.yaml.\n", v)
	return append([]byte(header), out...), nil
}
