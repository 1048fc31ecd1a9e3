package snapshot

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

func TestBar(t *testing.T) {
	for _, tc := range []struct {
		percent int32
		want    string
	}{
		{0, "[----------]"}, {45, "[####------]"}, {99, "[#########-]"}, {100, "[##########]"}, {-3, "[----------]"}, {140, "[##########]"},
	} {
		if got := bar(tc.percent, 10); got != tc.want {
			t.Errorf("bar(%d) = %q, want %q", tc.percent, got, tc.want)
		}
	}
}

const mib = 1 << 20

func started(p *etcdv1.SnapshotProgress) *etcdv1.EtcdSnapshot {
	return &etcdv1.EtcdSnapshot{Status: etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotStarted, Progress: p,
		Conditions: []metav1.Condition{{Type: etcdv1.SnapshotConditionReady, Status: metav1.ConditionFalse, Reason: etcdv1.ReasonInProgress, Message: "Job j is taking the snapshot"}}}}
}

func TestProgressText(t *testing.T) {
	pending := &etcdv1.EtcdSnapshot{Status: etcdv1.EtcdSnapshotStatus{Phase: etcdv1.SnapshotPending,
		Conditions: []metav1.Condition{{Type: etcdv1.SnapshotConditionReady, Message: "EtcdCluster main is not Available"}}}}
	complete := started(&etcdv1.SnapshotProgress{Percent: 100})
	complete.Status.Phase = etcdv1.SnapshotComplete
	for _, tc := range []struct {
		name string
		snap *etcdv1.EtcdSnapshot
		want string
	}{
		{"not looked at yet", &etcdv1.EtcdSnapshot{}, "Pending"},
		{"waiting for its cluster", pending, "Pending: EtcdCluster main is not Available"},
		{"started, no report yet", started(nil), "Started: Job j is taking the snapshot"},
		{"writing", started(&etcdv1.SnapshotProgress{BytesExpected: 512 * mib, BytesWritten: 128 * mib, Percent: 12}), " 12% 128.0 MiB of 512.0 MiB written"},
		{"reading back", started(&etcdv1.SnapshotProgress{BytesExpected: 512 * mib, BytesWritten: 512 * mib, BytesVerified: 256 * mib, Percent: 75}),
			" 75% 512.0 MiB of 512.0 MiB written, 256.0 MiB read back"},
		{"complete", complete, "Complete"},
	} {
		if got := progressText(tc.snap); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Off a terminal each change is one line, and nothing repeats; on a terminal one bar is
// redrawn in place and its line ended once.
func TestProgressViewDrawsEachChangeOnce(t *testing.T) {
	seq := []*etcdv1.EtcdSnapshot{
		started(nil),
		started(&etcdv1.SnapshotProgress{BytesExpected: 100 * mib, Percent: 0}),
		started(&etcdv1.SnapshotProgress{BytesExpected: 100 * mib, Percent: 0}),
		started(&etcdv1.SnapshotProgress{BytesExpected: 100 * mib, BytesWritten: 50 * mib, Percent: 25}),
	}
	var log bytes.Buffer
	view := newProgressView(&log)
	for _, s := range seq {
		view.show(s)
	}
	view.end()
	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	if len(lines) != 3 || strings.Contains(log.String(), "\r") || !strings.HasPrefix(lines[2], " 25%") {
		t.Errorf("off a terminal: %q, want three lines without carriage returns", log.String())
	}
	var tty bytes.Buffer
	view = &progressView{w: &tty, tty: true}
	for _, s := range seq {
		view.show(s)
	}
	view.end()
	out := tty.String()
	if strings.Count(out, "\r") != 3 || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "[#######-----------------------]  25% 50.0 MiB of 100.0 MiB written\x1b[K\n") {
		t.Errorf("on a terminal: %q", out)
	}
}

// waitSnapshot shows each state it reads: the progress, then the end.
func TestWaitSnapshotShowsTheProgressItReads(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := etcdv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	snap := started(&etcdv1.SnapshotProgress{BytesExpected: 100 * mib, BytesWritten: 100 * mib, Percent: 50})
	snap.Name, snap.Namespace = "s1", "ns"
	reads := 0
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(snap).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if reads++; reads > 1 { // the second look finds it stored
				s := obj.(*etcdv1.EtcdSnapshot)
				s.Status.Phase, s.Status.Progress.Percent = etcdv1.SnapshotComplete, 100
				s.Status.Artifact = &etcdv1.SnapshotArtifact{URI: "s3://b/s1.db", SizeBytes: 100 * mib}
			}
			return nil
		},
	}).Build()
	var out bytes.Buffer
	got, err := waitSnapshot(context.Background(), &cli.Kube{Client: api, Namespace: "ns"}, snap, time.Minute, newProgressView(&out))
	if err != nil || got.Status.Artifact == nil {
		t.Fatalf("%+v, %v", got, err)
	}
	if want := " 50% 100.0 MiB of 100.0 MiB written\nComplete\n"; out.String() != want {
		t.Errorf("shown %q, want %q", out.String(), want)
	}
}
