package e2e

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumkeeper/etcd-operator/test/release"
)

const (
	pushedVersion  = "v0.3.0-e2e"
	pushedRelease  = "eo-pushed"
	pushedFullname = "eo-pushed-operator" // its ClusterRoles stay apart from the other releases'
)

// A release made and pushed as make push does (test/release) to a registry on this
// machine's loopback, installed with helm from that registry (oci://, --plain-http), runs the
// operator from the pushed image: the local cluster's node agent pulls it (it is in no image
// map), and the Pod reports the pushed image and its digest, gets Ready and says the
// release's version. The release watches only its own, empty namespace and has a leader
// election id of its own: it manages nothing of the other tests, which run on meanwhile.
func TestAPushedReleaseInstallsFromItsRegistry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://") // 127.0.0.1:PORT

	pushed := pushRelease(t, ctx, host)
	ns := namespace(t)
	helm(t, "install", pushedRelease, "oci://"+host+"/charts/etcd-operator", "--version", strings.TrimPrefix(pushedVersion, "v"),
		"--plain-http", "--namespace", ns, "--wait", "--timeout", "5m",
		"--set", "fullnameOverride="+pushedFullname,
		"--set", "leaderElection.id="+pushedRelease,
		"--set", "watchNamespaces={"+ns+"}")
	t.Cleanup(func() { helm(t, "uninstall", pushedRelease, "--namespace", ns, "--wait") })

	platformImage, err := remote.Image(pushed.Image, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: goruntime.GOARCH}))
	if err != nil {
		t.Fatal(err)
	}
	digest, err := platformImage.Digest()
	if err != nil {
		t.Fatal(err)
	}
	pod := readyOperatorPod(t, ns)
	status := pod.Status.ContainerStatuses[0]
	if status.Image != pushed.Image.Name() {
		t.Errorf("the operator Pod runs image %s, want the pushed %s", status.Image, pushed.Image.Name())
	}
	if want := pushed.Image.Context().Name() + "@" + digest.String(); status.ImageID != want {
		t.Errorf("the operator Pod's imageID is %s, want %s (the pushed index's image for linux/%s)", status.ImageID, want, goruntime.GOARCH)
	}
	checkStartedVersion(t, ctx, pod)
}

// pushRelease makes a release for this machine's platform into a temporary directory and
// pushes its image and chart to the registry at host, as make release and make push do.
func pushRelease(t *testing.T, ctx context.Context, host string) release.Pushed {
	t.Helper()
	version, err := release.ParseVersion(pushedVersion)
	if err != nil {
		t.Fatal(err)
	}
	repo, err := release.ParseRepository(host+"/etcd-operator", true)
	if err != nil {
		t.Fatal(err)
	}
	dist := t.TempDir()
	buildCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if _, err := release.Run(buildCtx, release.Options{
		Root: "../..", Out: dist, Version: version, Repository: repo,
		ImagePlatforms:  []string{"linux/" + goruntime.GOARCH},
		PluginPlatforms: []string{goruntime.GOOS + "/" + goruntime.GOARCH},
	}); err != nil {
		t.Fatalf("release: %v", err)
	}
	pushed, err := release.Push(buildCtx, release.PushOptions{Dist: dist, Version: version, Repository: repo, Charts: release.ChartRepository(repo)})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	return pushed
}

// readyOperatorPod is the release's one operator Pod, once its container is Ready.
func readyOperatorPod(t *testing.T, ns string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	eventually(t, 2*time.Minute, "the pushed release's operator Pod Ready", func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator"}); err != nil {
			return err
		}
		if len(pods.Items) != 1 || len(pods.Items[0].Status.ContainerStatuses) != 1 {
			return fmt.Errorf("%d Pods, want 1 with its container's status", len(pods.Items))
		}
		pod = pods.Items[0]
		if s := pod.Status.ContainerStatuses[0]; !s.Ready {
			return fmt.Errorf("container not Ready: %+v", s.State)
		}
		return nil
	})
	return pod
}

// checkStartedVersion: the operator's start line names the release's version, which the
// release built into the binary.
func checkStartedVersion(t *testing.T, ctx context.Context, pod corev1.Pod) {
	t.Helper()
	eventually(t, time.Minute, "the operator's start line with version "+pushedVersion, func() error {
		raw, err := kubeClientset(t).CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, `"msg":"starting"`) {
				if strings.Contains(line, `"version":"`+pushedVersion+`"`) {
					return nil
				}
				return fmt.Errorf("start line %s", line)
			}
		}
		return fmt.Errorf("no start line in the log yet")
	})
}
