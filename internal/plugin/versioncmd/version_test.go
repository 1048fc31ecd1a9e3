package versioncmd

import (
	"reflect"
	"runtime/debug"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/version"
)

func deployment(ns, name, image string, labels map[string]string) appsv1.Deployment {
	return appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Image: "proxy:1"}, {Name: "manager", Image: image}}}}},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 1}}
}

// The operator's version comes from the chart's version label, else its image's tag; Cozystack's
// operator, labelled alike, is left out.
func TestOperatorsOf(t *testing.T) {
	got := operatorsOf([]appsv1.Deployment{
		deployment("etcd-operator-system", "etcd-operator", "ghcr.io/quorumkeeper/etcd-operator:v0.4.0", nil),
		deployment("ops", "etcd-operator", "mirror.example:5000/etcd-operator:v0.4.1@sha256:abc", map[string]string{"app.kubernetes.io/version": "v0.4.1-chart"}),
		deployment("cozy", "etcd-operator", "ghcr.io/cozystack/cozystack/etcd-operator:v0.5.4", nil),
		deployment("x", "digest-only", "registry.example:5000/etcd-operator@sha256:def", nil),
	})
	want := []OperatorVersion{
		{Namespace: "etcd-operator-system", Deployment: "etcd-operator", Image: "ghcr.io/quorumkeeper/etcd-operator:v0.4.0", Version: "v0.4.0", Replicas: 1, Ready: 1},
		{Namespace: "ops", Deployment: "etcd-operator", Image: "mirror.example:5000/etcd-operator:v0.4.1@sha256:abc", Version: "v0.4.1-chart", Replicas: 1, Ready: 1},
		{Namespace: "x", Deployment: "digest-only", Image: "registry.example:5000/etcd-operator@sha256:def", Version: "", Replicas: 1, Ready: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("operatorsOf\n got %+v\nwant %+v", got, want)
	}
}

func TestImageTag(t *testing.T) {
	for image, want := range map[string]string{
		"etcd-operator:dev": "dev", "ghcr.io/a/b:v1.2.3": "v1.2.3", "localhost:5000/b": "", "localhost:5000/b:v1": "v1",
		"b@sha256:abc": "", "b:v2@sha256:abc": "v2", "b": "",
	} {
		if got := imageTag(image); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", image, got, want)
		}
	}
}

// The plugin's revision is the one Go stamped at build time.
func TestPluginBuild(t *testing.T) {
	bi := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "f2b83de"}, {Key: "vcs.modified", Value: "true"}}}
	b := pluginBuild(bi, true)
	if b.Version != version.Version || b.Revision != "f2b83de" || !b.Modified || b.GoVersion == "" || !strings.Contains(b.Platform, "/") {
		t.Errorf("build %+v", b)
	}
	if b := pluginBuild(nil, false); b.Revision != "" || b.Version != version.Version {
		t.Errorf("without build info: %+v", b)
	}
	version.StampedRevision = "4015dc1"
	defer func() { version.StampedRevision = "" }()
	if b := pluginBuild(bi, true); b.Revision != "4015dc1" || b.Modified {
		t.Errorf("the stamped revision does not win over Go's record: %+v", b)
	}
}

func TestVersionPrintout(t *testing.T) {
	info := Info{Plugin: Build{Version: "v0.4.0", Revision: "abc", GoVersion: "go1.26", Platform: "linux/amd64"},
		Operators:   []OperatorVersion{{Namespace: "ops", Deployment: "etcd-operator", Image: "i:v0.4.0", Version: "v0.4.0", Replicas: 2, Ready: 2, ImageIDs: []string{"sha256:abc"}}},
		ServerError: "connection refused"}
	for output, want := range map[string][]string{
		"":     {"plugin:", "v0.4.0", "revision abc", "operator:", "ops/etcd-operator", "2/2 ready", "server:", "unknown: connection refused"},
		"wide": {"sha256:abc"},
		"json": {`"serverError": "connection refused"`, `"imageIDs"`},
	} {
		var out strings.Builder
		if err := (&cli.Options{Output: output, Out: &out}).Print(printout(info)); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("-o %q lacks %q:\n%s", output, w, out.String())
			}
		}
	}
	if err := (&cli.Options{Output: "name", Out: &strings.Builder{}}).Print(printout(info)); err == nil {
		t.Error("-o name of the version: no refusal")
	}
}
