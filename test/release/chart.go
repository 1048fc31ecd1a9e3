package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"sigs.k8s.io/yaml"
)

// chartMetadata is Chart.yaml with version and appVersion set to the release's.
func chartMetadata(chartYAML []byte, v Version) (map[string]any, error) {
	meta := map[string]any{}
	if err := yaml.Unmarshal(chartYAML, &meta); err != nil {
		return nil, fmt.Errorf("the chart's Chart.yaml: %w", err)
	}
	if name, _ := meta["name"].(string); name == "" {
		return nil, errors.New("the chart's Chart.yaml has no name")
	}
	meta["version"] = v.Chart()
	meta["appVersion"] = v.String()
	return meta, nil
}

// valuesRepository is the line of values.yaml that names the operator's image repository.
var valuesRepository = regexp.MustCompile(`(?m)^(\s+repository:\s*)` + regexp.QuoteMeta(SourceImage) + `\s*$`)

// chartValues is values.yaml with the image repository repo: the chart of a release runs the
// image of the release. The line is replaced in the text, so the comments `helm show values`
// shows stay.
func chartValues(values []byte, repo string) ([]byte, error) {
	if n := len(valuesRepository.FindAll(values, -1)); n != 1 {
		return nil, fmt.Errorf("values.yaml names the image repository %s %d times, want once (image.repository)", SourceImage, n)
	}
	return valuesRepository.ReplaceAll(values, []byte("${1}"+repo)), nil
}

// PackageChart writes the chart in chartDir as outDir/NAME-VERSION.tgz, the archive helm
// package writes (every file under a NAME/ directory, Chart.yaml rewritten), with version and
// appVersion from v and the image repository repo; mtime dates every file, so equal inputs
// give an equal archive.
func PackageChart(chartDir string, v Version, repo string, mtime time.Time, outDir string) (string, error) {
	// helm package would leave out what .helmignore names; this packs everything, so refuse
	// a chart that relies on it rather than ship files helm would not.
	if _, err := os.Stat(filepath.Join(chartDir, ".helmignore")); err == nil {
		return "", fmt.Errorf("%s has a .helmignore, which this packager does not read", chartDir)
	}
	chartYAML, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return "", err
	}
	meta, err := chartMetadata(chartYAML, v)
	if err != nil {
		return "", err
	}
	rewritten, err := yaml.Marshal(meta)
	if err != nil {
		return "", err
	}
	files, err := chartFiles(chartDir)
	if err != nil {
		return "", err
	}
	files["Chart.yaml"] = rewritten
	if files["values.yaml"], err = chartValues(files["values.yaml"], repo); err != nil {
		return "", err
	}
	name := meta["name"].(string)
	archive, err := tarGzip(name, files, mtime)
	if err != nil {
		return "", err
	}
	path := filepath.Join(outDir, fmt.Sprintf("%s-%s.tgz", name, v.Chart()))
	return path, os.WriteFile(path, archive, 0o644)
}

// chartFiles reads every regular file under dir, by its slash-separated relative path.
func chartFiles(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	return files, err
}

// tarGzip is a gzipped tar of files (mode 0644) under prefix/, in name order.
func tarGzip(prefix string, files map[string][]byte, mtime time.Time) ([]byte, error) {
	names := slices.Sorted(maps.Keys(files))
	entries := make([]tarEntry, 0, len(names))
	for _, n := range names {
		entries = append(entries, tarEntry{name: prefix + "/" + n, mode: 0o644, data: files[n]})
	}
	return writeTarGzip(entries, mtime)
}

// tarEntry is one regular file of an archive.
type tarEntry struct {
	name string
	mode int64
	data []byte
}

func writeTarGzip(entries []tarEntry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.data)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
