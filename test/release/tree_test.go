package release

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// TestTreeNamesOneVersion: the checkout names one release everywhere it names one, so that
// helm install from the checkout, kubectl apply -k config/default and the commands in
// docs/install.md all mean the same operator.
func TestTreeNamesOneVersion(t *testing.T) {
	root := repoRoot(t)
	chartYAML, err := os.ReadFile(filepath.Join(root, "charts", "etcd-operator", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct{ Version, AppVersion string }
	if err := yaml.Unmarshal(chartYAML, &chart); err != nil {
		t.Fatal(err)
	}
	v, err := ParseVersion(chart.AppVersion)
	if err != nil {
		t.Fatalf("Chart.yaml's appVersion: %v", err)
	}
	if chart.Version != v.Chart() {
		t.Errorf("Chart.yaml: version %s, appVersion %s; want version = appVersion without its v", chart.Version, chart.AppVersion)
	}
	manager, err := os.ReadFile(filepath.Join(root, "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ManagerImage(manager); err != nil || got != SourceImage+":"+v.String() {
		t.Errorf("config/manager's image = %q (%v), want %s:%s as Chart.yaml's appVersion", got, err, SourceImage, v)
	}
	docs, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pattern, want string
	}{
		{`VERSION=(v[0-9][0-9A-Za-z.-]*)`, v.String()},
		{`etcd-operator-([0-9][0-9A-Za-z.-]*)\.tgz`, v.Chart()},
		{`etcd-operator:(v[0-9][0-9A-Za-z.-]*[0-9A-Za-z])`, v.String()},
		{`--version ([0-9][0-9A-Za-z.-]*[0-9A-Za-z])`, v.Chart()},
	} {
		matches := regexp.MustCompile(tc.pattern).FindAllSubmatch(docs, -1)
		if len(matches) == 0 {
			t.Errorf("docs/install.md has no %s", tc.pattern)
		}
		for _, m := range matches {
			if string(m[1]) != tc.want {
				t.Errorf("docs/install.md: %q, want %s as in Chart.yaml", m[0], tc.want)
			}
		}
	}
}

// TestLocalOverlayRunsTheCheckoutsImage: the local cluster deploys config/local
// (hack/deploy-operator.sh), whose operator must be the image built from this checkout; no
// other kustomization names that image, which no registry serves.
func TestLocalOverlayRunsTheCheckoutsImage(t *testing.T) {
	root := repoRoot(t)
	// The key under which hack/images.sh maps that image for the local cluster's node agents.
	script, err := os.ReadFile(filepath.Join(root, "hack", "images.sh"))
	if err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`image-builder" unpack .* -key (\S+)\)`).FindSubmatch(script)
	if key == nil {
		t.Fatal("hack/images.sh unpacks no operator image under a -key")
	}
	localImage := string(key[1])
	for dir, want := range map[string]string{
		"config/local":   localImage,
		"config/default": "", // the release's image: TestTreeNamesOneVersion
	} {
		resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
		if err != nil {
			t.Fatalf("kustomize %s: %v", dir, err)
		}
		out, err := resources.AsYaml()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ManagerImage(out)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if (want != "" && got != want) || (want == "" && got == localImage) {
			t.Errorf("%s runs the operator image %s", dir, got)
		}
	}
}
