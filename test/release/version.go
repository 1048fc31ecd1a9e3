// Package release writes one release of the operator into a directory (make release) and
// pushes it to a registry (make push): the multi-platform OCI image, install.yaml naming that
// image, the Helm chart, and the kubectl-etcd plugin's archives with the krew manifest over
// them. Every artifact takes its version from the one VERSION, so they cannot disagree.
package release

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Version is a release's version, vMAJOR.MINOR.PATCH with an optional pre-release: the image
// tag and the krew manifest's version as it is, the chart's without the v (Helm wants SemVer).
type Version struct{ s string }

// The pre-release identifiers of SemVer 2.0 (numeric ones without leading zeros). Build
// metadata (+...) is left out: an image tag cannot hold a +.
const (
	semverNumber = `(0|[1-9][0-9]*)`
	preRelease   = `(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)`
)

var versionPattern = regexp.MustCompile(`^v` + semverNumber + `\.` + semverNumber + `\.` + semverNumber +
	`(-` + preRelease + `(\.` + preRelease + `)*)?$`)

// maxTagLength is the OCI distribution spec's limit on a tag.
const maxTagLength = 128

// ParseVersion accepts vMAJOR.MINOR.PATCH[-PRERELEASE] and nothing else.
func ParseVersion(s string) (Version, error) {
	if !versionPattern.MatchString(s) || len(s) > maxTagLength {
		return Version{}, fmt.Errorf("VERSION %q is not vMAJOR.MINOR.PATCH[-PRERELEASE] (e.g. v0.3.0, v0.3.0-rc.1): "+
			"it is the image tag and the krew version as it is, and the chart version without the v, which Helm wants SemVer", s)
	}
	return Version{s: s}, nil
}

// String is the version as given: v0.3.0.
func (v Version) String() string { return v.s }

// Chart is the chart's version: v0.3.0 -> 0.3.0.
func (v Version) Chart() string { return strings.TrimPrefix(v.s, "v") }

// ParseRepository accepts an image repository without a tag or digest (the tag is the
// version) and with its registry named. plainHTTP talks HTTP to that registry; without it,
// HTTP is used only for localhost, loopback and private addresses (go-containerregistry's rule).
func ParseRepository(s string, plainHTTP bool) (name.Repository, error) {
	opts := []name.Option{name.StrictValidation}
	if plainHTTP {
		opts = append(opts, name.Insecure)
	}
	repo, err := name.NewRepository(s, opts...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("IMAGE %q is not an image repository (registry/path, no tag: the tag is VERSION): %w", s, err)
	}
	return repo, nil
}

// ChartRepository is where the chart goes by default: a "charts" repository beside the image's,
// so IMAGE ghcr.io/org/etcd-operator puts the chart at ghcr.io/org/charts/etcd-operator. It
// is on the image's registry, spoken to as that one is.
func ChartRepository(image name.Repository) name.Repository {
	path := image.RepositoryStr()
	parent := "charts"
	if i := strings.LastIndex(path, "/"); i >= 0 {
		parent = path[:i] + "/charts"
	}
	return image.Repo(parent)
}
