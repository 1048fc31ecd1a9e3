package release

import (
	"strings"
	"testing"
)

func TestParseVersionTakesVSemVerOnly(t *testing.T) {
	for _, tc := range []struct {
		in, chart string // chart "": refused
	}{
		{"v0.3.0", "0.3.0"},
		{"v10.20.30", "10.20.30"},
		{"v0.3.0-rc.1", "0.3.0-rc.1"},
		{"v0.0.0-dev-f2b83de-dirty", "0.0.0-dev-f2b83de-dirty"},
		{"v1.0.0-0.3.7", "1.0.0-0.3.7"},
		{"0.3.0", ""},                              // no v: the image tag and krew want it
		{"v0.3", ""},                               // not MAJOR.MINOR.PATCH
		{"v01.3.0", ""},                            // leading zero
		{"v0.3.0-01", ""},                          // numeric pre-release with a leading zero
		{"v0.3.0+build.1", ""},                     // build metadata: no + in an image tag
		{"v0.3.0-", ""},                            // empty pre-release
		{"f2b83de-dirty", ""},                      // git describe's form
		{"dev", ""},                                //
		{"v0.3.0-rc..1", ""},                       // empty identifier
		{"v0.3.0 ", ""},                            // trailing space
		{"v0.3.0-" + strings.Repeat("a", 128), ""}, // longer than a tag may be
	} {
		v, err := ParseVersion(tc.in)
		switch {
		case tc.chart == "" && err == nil:
			t.Errorf("ParseVersion(%q) = %v, want refused", tc.in, v)
		case tc.chart == "" && !strings.Contains(err.Error(), "vMAJOR.MINOR.PATCH"):
			t.Errorf("ParseVersion(%q): %v, want a message that says the form", tc.in, err)
		case tc.chart != "" && err != nil:
			t.Errorf("ParseVersion(%q): %v", tc.in, err)
		case tc.chart != "" && (v.String() != tc.in || v.Chart() != tc.chart):
			t.Errorf("ParseVersion(%q) = %s, chart %s; want %s, chart %s", tc.in, v, v.Chart(), tc.in, tc.chart)
		}
	}
}

func TestRepositoryHasNoTagAndTheChartsGoBesideIt(t *testing.T) {
	for _, tc := range []struct {
		image, charts string // charts "": refused
	}{
		{"ghcr.io/quorumkeeper/etcd-operator", "ghcr.io/quorumkeeper/charts"},
		{"registry.example/etcd-operator", "registry.example/charts"},
		{"127.0.0.1:5000/a/b/etcd-operator", "127.0.0.1:5000/a/b/charts"},
		{"ghcr.io/quorumkeeper/etcd-operator:v0.3.0", ""}, // the tag is VERSION
		{"etcd-operator", ""},                      // no registry named
		{"ghcr.io/Quorumkeeper/etcd-operator", ""}, // not a repository name
	} {
		repo, err := ParseRepository(tc.image, false)
		switch {
		case tc.charts == "" && err == nil:
			t.Errorf("ParseRepository(%q) = %v, want refused", tc.image, repo)
		case tc.charts != "" && err != nil:
			t.Errorf("ParseRepository(%q): %v", tc.image, err)
		case tc.charts != "" && ChartRepository(repo).Name() != tc.charts:
			t.Errorf("ChartRepository(%q) = %s, want %s", tc.image, ChartRepository(repo).Name(), tc.charts)
		}
	}
}
