package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/quorumkeeper/etcd-operator/test/localcluster/netsetup"
)

// A Pod deleted with a long grace period whose container exits at SIGTERM is gone from the
// API as soon as DeletePod returns, as under a kubelet: final status first, then a delete with
// grace 0. Waiting for the grace period anywhere would run into the test's timeout instead.
func TestDeletePodRemovesTheObjectOnceTheContainersExited(t *testing.T) {
	grace := int64(600)
	pod := helperPod("sleeper", grace, "sleep=1h")
	client := fake.NewClientset(pod)
	p := newTestProvider(t, client)
	if err := p.CreatePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	waitForContainerRunning(t, p, pod)

	deleting := markForDeletion(t, client, pod)
	client.ClearActions()
	if err := p.DeletePod(t.Context(), deleting); err != nil {
		t.Fatalf("DeletePod: %v", err)
	}

	actions := client.Actions()
	if len(actions) != 3 || !actions[1].Matches("update", "pods") || actions[1].GetSubresource() != "status" || !actions[2].Matches("delete", "pods") {
		t.Fatalf("API calls = %s, want get, update of the status, delete", describe(actions))
	}
	status := actions[1].(k8stesting.UpdateAction).GetObject().(*corev1.Pod).Status
	if term := status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 143 {
		t.Errorf("final container state %+v, want terminated by SIGTERM (exit 143)", status.ContainerStatuses[0].State)
	}
	opts := actions[2].(k8stesting.DeleteAction).GetDeleteOptions()
	if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 || opts.Preconditions == nil || *opts.Preconditions.UID != pod.UID {
		t.Errorf("delete options %+v, want grace 0 and the Pod's UID as precondition", opts)
	}
	if _, err := client.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Pod object is still there after DeletePod (err %v)", err)
	}
}

// A Pod the API no longer has (virtual-kubelet's clean-up of leftovers) is only stopped.
func TestDeletePodOfAPodNotMarkedForDeletionMakesNoAPICall(t *testing.T) {
	pod := helperPod("leftover", 600, "sleep=1h")
	client := fake.NewClientset(pod)
	p := newTestProvider(t, client)
	if err := p.CreatePod(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	waitForContainerRunning(t, p, pod)
	client.ClearActions()
	if err := p.DeletePod(t.Context(), pod); err != nil {
		t.Fatalf("DeletePod: %v", err)
	}
	if actions := client.Actions(); len(actions) != 0 {
		t.Errorf("API calls = %s, want none", describe(actions))
	}
}

const helperImage = "localcluster/node-test-helper:v1"

// helperPod runs the runtime tests' helper with the given actions.
func helperPod(name string, grace int64, actions ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("0badc0de-0000-4000-8000-" + fmt.Sprintf("%012x", len(name)))},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			Containers:                    []corev1.Container{{Name: "main", Image: helperImage, Args: actions}},
		},
	}
}

// newTestProvider is a node of its own network (clear of the real local cluster's) and state
// directory, whose image map has the helper.
func newTestProvider(t *testing.T, client *fake.Clientset) *provider {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test creates network and mount namespaces and must run as root")
	}
	network := netsetup.Config{
		Bridge:      "lcbrnt",
		BridgeCIDR:  netip.MustParsePrefix("10.218.0.1/24"),
		ServiceCIDR: netip.MustParsePrefix("10.218.1.0/24"),
		NSPrefix:    "lcnt-",
	}
	if err := netsetup.SetUp(network); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netsetup.TearDown(network) })
	dir := t.TempDir()
	images := filepath.Join(dir, "images.yaml")
	imageMap := fmt.Sprintf("%s:\n  files: {/bin/helper: %s}\n  entrypoint: [/bin/helper]\n  env: [PATH=/bin]\n", helperImage, buildHelper(t))
	if err := os.WriteFile(images, []byte(imageMap), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newProvider(Config{
		Client:     client,
		Dir:        dir,
		Network:    network,
		PodCIDR:    netip.MustParsePrefix("10.218.0.0/25"),
		HostIP:     network.BridgeCIDR.Addr(),
		ImagesFile: images,
		Marker:     "LC_NODE_TEST=" + dir,
	}, volumeSources{client: client}, nil)
	t.Cleanup(func() { p.stopAll(context.Background(), false) })
	return p
}

// buildHelper builds the runtime tests' helper program, static so that it runs in a root
// without libraries.
func buildHelper(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "helper")
	build := exec.Command("go", "build", "-o", out, "../runtime/testdata/helper")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build helper: %v\n%s", err, msg)
	}
	return out
}

func waitForContainerRunning(t *testing.T, p *provider, pod *corev1.Pod) {
	t.Helper()
	var last *corev1.Pod
	for range 600 {
		got, err := p.GetPod(t.Context(), pod.Namespace, pod.Name)
		if err != nil {
			t.Fatal(err)
		}
		last = got
		if statuses := got.Status.ContainerStatuses; len(statuses) == 1 && statuses[0].State.Running != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the container did not start: %+v", last.Status)
}

// markForDeletion does what the API does on a graceful delete and returns the Pod as
// virtual-kubelet then hands it to DeletePod.
func markForDeletion(t *testing.T, client *fake.Clientset, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	deleting := pod.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	deleting.DeletionGracePeriodSeconds = pod.Spec.TerminationGracePeriodSeconds
	if _, err := client.CoreV1().Pods(pod.Namespace).Update(t.Context(), deleting, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return deleting
}

func describe(actions []k8stesting.Action) string {
	s := ""
	for _, a := range actions {
		s += fmt.Sprintf("[%s %s/%s] ", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
	}
	return s
}
