package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testrestore"
)

// The local cluster's MinIO (LOCALCLUSTER_ADDONS="cert-manager minio", hack/e2e.sh's default)
// writes its endpoint and root credentials to s3.env in the cluster's state directory. Pods
// and this test reach it at the same bridge address.
type s3Server struct {
	endpoint, accessKey, secretKey string
	admin                          *minio.Client
}

var (
	s3Once sync.Once
	s3Srv  *s3Server
	s3Err  error
)

func localS3(t *testing.T) *s3Server {
	t.Helper()
	s3Once.Do(func() { s3Srv, s3Err = readS3Env() })
	if s3Err != nil {
		t.Fatalf("the local cluster's MinIO: %v (make test-e2e starts it; by hand: LOCALCLUSTER_ADDONS=\"cert-manager minio\" make local-up)", s3Err)
	}
	return s3Srv
}

func readS3Env() (*s3Server, error) {
	dir := os.Getenv("LOCALCLUSTER_DIR")
	if dir == "" {
		dir = "/var/lib/etcd-operator-localcluster"
	}
	f, err := os.Open(filepath.Join(dir, "s3.env"))
	if err != nil {
		return nil, err
	}
	defer f.Close() // read-only
	env := map[string]string{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	s := &s3Server{endpoint: env["S3_ENDPOINT"], accessKey: env["AWS_ACCESS_KEY_ID"], secretKey: env["AWS_SECRET_ACCESS_KEY"]}
	if s.endpoint == "" || s.accessKey == "" {
		return nil, fmt.Errorf("%s/s3.env names no endpoint or credentials", dir)
	}
	s.admin, err = minio.New(strings.TrimPrefix(s.endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(s.accessKey, s.secretKey, ""), Region: "us-east-1"})
	return s, err
}

// bucketFor makes a bucket named after the test's namespace.
func bucketFor(t *testing.T, ns string) string {
	t.Helper()
	if err := localS3(t).admin.MakeBucket(context.Background(), ns, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("making bucket %s: %v", ns, err)
	}
	return ns
}

// objects lists the bucket's keys under prefix with their sizes.
func objects(t *testing.T, bucket, prefix string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for obj := range localS3(t).admin.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("listing bucket %s: %v", bucket, obj.Err)
		}
		out[obj.Key] = obj.Size
	}
	return out
}

const s3SecretName = "s3-credentials"

// s3Namespace is a new namespace with a bucket of its name and the credentials Secret.
func s3Namespace(t *testing.T) (ns, bucket string) {
	t.Helper()
	ns = namespace(t)
	bucket = bucketFor(t, ns)
	s3Secret(t, ns, s3SecretName, localS3(t).secretKey)
	return ns, bucket
}

// s3Secret creates the credentials Secret, with the given secret key.
func s3Secret(t *testing.T, ns, name, secretKey string) {
	t.Helper()
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: map[string]string{
		"AWS_ACCESS_KEY_ID": localS3(t).accessKey, "AWS_SECRET_ACCESS_KEY": secretKey}})
}

func s3Location(t *testing.T, bucket, key string) etcdv1.SnapshotLocation {
	return etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Endpoint: localS3(t).endpoint, Bucket: bucket, Key: key,
		CredentialsSecretRef: corev1.LocalObjectReference{Name: s3SecretName}, Region: "us-east-1", ForcePathStyle: true}}
}

func createSnapshot(t *testing.T, ns, name, cluster string, dest etcdv1.SnapshotLocation) {
	t.Helper()
	create(t, &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: cluster}, Destination: dest}})
}

func getSnapshot(t *testing.T, ns, name string) *etcdv1.EtcdSnapshot {
	t.Helper()
	s := &etcdv1.EtcdSnapshot{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitSnapshotDone waits for Complete or Failed; the other outcome fails the test at once.
func waitSnapshotDone(t *testing.T, ns, name string, want etcdv1.SnapshotPhase) *etcdv1.EtcdSnapshot {
	t.Helper()
	var s *etcdv1.EtcdSnapshot
	eventually(t, 4*time.Minute, fmt.Sprintf("EtcdSnapshot %s %s", name, want), func() error {
		s = getSnapshot(t, ns, name)
		ready := meta.FindStatusCondition(s.Status.Conditions, "Ready")
		switch s.Status.Phase {
		case want:
			return nil
		case etcdv1.SnapshotComplete, etcdv1.SnapshotFailed:
			t.Fatalf("EtcdSnapshot %s ended %s (%+v), want %s; its agents' logs:\n%s", name, s.Status.Phase, ready, want, agentLogs(t, ns, s))
		}
		return fmt.Errorf("phase %q, Ready %+v", s.Status.Phase, ready)
	})
	return s
}

// agentLogs is the end of the log of every agent Pod of the snapshot: what an unexpected end
// is explained by when the status cannot say more.
func agentLogs(t *testing.T, ns string, s *etcdv1.EtcdSnapshot) string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelSnapshotUID: string(s.UID)}); err != nil {
		return err.Error()
	}
	var out strings.Builder
	for i := range pods.Items {
		p := &pods.Items[i]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		raw, err := kubeClientset(t).CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr(int64(40))}).DoRaw(ctx)
		cancel()
		if err != nil {
			raw = []byte("(no log: " + err.Error() + ")")
		}
		fmt.Fprintf(&out, "--- Pod %s (%s, %+v):\n%s\n", p.Name, p.Status.Phase, p.Status.ContainerStatuses, raw)
	}
	return out.String()
}

// checkComplete checks what status says about a complete snapshot of cluster at uri.
func checkComplete(t *testing.T, s *etcdv1.EtcdSnapshot, c *etcdv1.EtcdCluster, uri string) {
	t.Helper()
	a, st := s.Status.Artifact, s.Status
	switch {
	case a == nil || a.URI != uri || a.SizeBytes <= 0 || !strings.HasPrefix(a.Checksum, "sha256:") || len(a.Checksum) != len("sha256:")+64:
		t.Fatalf("artifact %+v, want uri %s with a size and a sha256 checksum", a, uri)
	case st.Revision <= 0 || st.ClusterID != c.Status.ClusterID || st.EtcdVersion != etcdVersion:
		t.Fatalf("revision %d, cluster ID %s (the cluster's %s), etcd version %s", st.Revision, st.ClusterID, c.Status.ClusterID, st.EtcdVersion)
	case !strings.HasPrefix(st.Member, c.Name+"-") || st.StartTime == nil || st.CompletionTime == nil:
		t.Fatalf("member %q, start %v, completion %v", st.Member, st.StartTime, st.CompletionTime)
	case !meta.IsStatusConditionTrue(st.Conditions, "Ready"):
		t.Fatalf("Complete but not Ready: %+v", st.Conditions)
	}
}

// loadKeys writes n keys under prefix, every 500th value 100 KiB, eight at a time.
func loadKeys(t *testing.T, cli *clientv3.Client, prefix string, n int) {
	t.Helper()
	big := strings.Repeat("b", 100<<10)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				val := fmt.Sprintf("value-%d", i)
				if i%500 == 0 {
					val += big
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := cli.Put(ctx, fmt.Sprintf("%s/%06d", prefix, i), val)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("loading key %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// createRestoredCluster creates a cluster of n members bootstrapped from source.
func createRestoredCluster(t *testing.T, ns, name string, n int32, source etcdv1.RestoreSource) {
	t.Helper()
	create(t, &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: etcdv1.EtcdClusterSpec{
		Replicas: ptr(n), Version: etcdVersion,
		Bootstrap: &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: source}}}})
}

// restoreFrom is a restore source reading a snapshot file where loc says.
func restoreFrom(loc etcdv1.SnapshotLocation) etcdv1.RestoreSource {
	return etcdv1.RestoreSource{S3: loc.S3, PVC: loc.PVC}
}

// restoreFromSnapshot is a restore source naming an EtcdSnapshot.
func restoreFromSnapshot(name string) etcdv1.RestoreSource {
	return etcdv1.RestoreSource{SnapshotRef: &corev1.LocalObjectReference{Name: name}}
}

// snapshotOfLiveCluster loads a 3-member cluster, snapshots it to dest while a writer runs,
// and checks the writer's acknowledged writes afterwards.
func snapshotOfLiveCluster(t *testing.T, ns string, keys int, dest etcdv1.SnapshotLocation, uri string) (*etcdv1.EtcdSnapshot, *clientv3.Client) {
	t.Helper()
	createCluster(t, ns, "source", 3)
	c := waitSettled(t, ns, "source", 3, 5*time.Minute)
	src := dialClusterWith(t, ns, "source", access{})
	loadKeys(t, src, "/load", keys)
	w := startWriter(t, ns, "source", "/writer")
	createSnapshot(t, ns, "snap", "source", dest)
	s := waitSnapshotDone(t, ns, "snap", etcdv1.SnapshotComplete)
	w.stopAndVerify(t, 10)
	checkComplete(t, s, c, uri)
	return s, src
}

// A snapshot of a live 3-member cluster goes to S3, complete and verified; a NEW cluster
// restored from it holds every key, value and revision the source had at the snapshot's
// revision, has a cluster ID of its own, takes writes and scales. A second, one-member,
// cluster restored at the same time by naming the EtcdSnapshot (snapshotRef) holds the same.
func TestSnapshotToS3AndRestoreIntoANewCluster(t *testing.T) {
	t.Parallel()
	ns, bucket := s3Namespace(t)
	s, src := snapshotOfLiveCluster(t, ns, 10000, s3Location(t, bucket, "snapshots/"), "s3://"+bucket+"/"+keyOf("snapshots/", ns, "source", "snap"))
	stored := objects(t, bucket, "")
	if len(stored) != 1 || stored[keyOf("snapshots/", ns, "source", "snap")] != s.Status.Artifact.SizeBytes {
		t.Fatalf("the bucket holds %v, want only the snapshot of %d bytes", stored, s.Status.Artifact.SizeBytes)
	}

	createRestoredCluster(t, ns, "restored", 3, restoreFrom(s3Location(t, bucket, keyOf("snapshots/", ns, "source", "snap"))))
	createRestoredCluster(t, ns, "by-ref", 1, restoreFromSnapshot("snap"))
	waitSettled(t, ns, "restored", 3, 6*time.Minute)
	dst := dialClusterWith(t, ns, "restored", access{})
	testrestore.Compare(t, src, dst, s.Status.Revision, 10000)
	byRef := waitSettled(t, ns, "by-ref", 1, 3*time.Minute)
	if byRef.Status.ClusterID == getCluster(t, ns, "restored").Status.ClusterID {
		t.Fatalf("two clusters restored from one snapshot share the cluster ID %s", byRef.Status.ClusterID)
	}
	testrestore.Compare(t, src, dialClusterWith(t, ns, "by-ref", access{}), s.Status.Revision, 10000)

	w := startWriter(t, ns, "restored", "/after-restore")
	setReplicas(t, ns, "restored", 4)
	waitSettled(t, ns, "restored", 4, 4*time.Minute)
	w.stopAndVerify(t, 10)

	// deletionPolicy Retain (the default): the file outlives its EtcdSnapshot.
	deleteSnapshotAndWait(t, ns, "snap")
	if ok, err := objectExists(bucket, keyOf("snapshots/", ns, "source", "snap")); !ok {
		t.Fatalf("deleting a Retain snapshot removed its file: %v", err)
	}

	// deletionPolicy Delete: the file goes with its EtcdSnapshot.
	create(t, &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "snap-delete", Namespace: ns},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "source"},
			Destination: s3Location(t, bucket, "snapshots/"), DeletionPolicy: etcdv1.SnapshotDelete}})
	waitSnapshotDone(t, ns, "snap-delete", etcdv1.SnapshotComplete)
	if ok, err := objectExists(bucket, keyOf("snapshots/", ns, "source", "snap-delete")); !ok {
		t.Fatalf("the Delete snapshot's file is not where its URI says: %v", err)
	}
	deleteSnapshotAndWait(t, ns, "snap-delete")
	if err := objectDeleted(bucket, keyOf("snapshots/", ns, "source", "snap-delete")); err != nil {
		t.Fatalf("deleting a Delete snapshot: %v", err)
	}
	if ok, err := objectExists(bucket, keyOf("snapshots/", ns, "source", "snap")); !ok {
		t.Fatalf("deleting one snapshot with its file removed another's: %v", err)
	}
}

func deleteSnapshotAndWait(t *testing.T, ns, name string) {
	t.Helper()
	deleteSnapshot(t, ns, name)
	waitSnapshotGone(t, ns, name)
}

func deleteSnapshot(t *testing.T, ns, name string) {
	t.Helper()
	if err := k8s.Delete(context.Background(), &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
}

func waitSnapshotGone(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, 2*time.Minute, "EtcdSnapshot "+name+" gone", func() error {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &etcdv1.EtcdSnapshot{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%w)", err)
	})
}

// The operator dies while a snapshot's Job runs, and again while a new cluster restores it:
// the snapshot still completes verified, once, and the restored cluster comes up with the data.
func TestOperatorKilledDuringSnapshotAndRestoreConverges(t *testing.T) {
	ns, bucket := s3Namespace(t)
	createCluster(t, ns, "source", 1)
	c := waitSettled(t, ns, "source", 1, 4*time.Minute)
	src := dialClusterWith(t, ns, "source", access{})
	loadKeys(t, src, "/load", 2000)
	createSnapshot(t, ns, "snap", "source", s3Location(t, bucket, ""))
	eventually(t, 2*time.Minute, "the snapshot started", func() error {
		if phase := getSnapshot(t, ns, "snap").Status.Phase; phase != etcdv1.SnapshotStarted {
			return fmt.Errorf("phase %q", phase)
		}
		return nil
	})
	killOperator(t)
	s := waitSnapshotDone(t, ns, "snap", etcdv1.SnapshotComplete)
	checkComplete(t, s, c, "s3://"+bucket+"/"+keyOf("", ns, "source", "snap"))

	createRestoredCluster(t, ns, "restored", 3, restoreFrom(s3Location(t, bucket, keyOf("", ns, "source", "snap"))))
	eventually(t, 2*time.Minute, "the first member's Pod restoring", func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "restored-1"}, &corev1.Pod{})
	})
	killOperator(t)
	waitSettled(t, ns, "restored", 3, 6*time.Minute)
	testrestore.Compare(t, src, dialClusterWith(t, ns, "restored", access{}), s.Status.Revision, 2000)
}

// The same to a PersistentVolumeClaim, and a restore from the file on it.
func TestSnapshotToPVCAndRestoreIntoANewCluster(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	create(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}})
	dest := etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "etcd"}}
	s, src := snapshotOfLiveCluster(t, ns, 2000, dest, "pvc://backups/etcd/snap.db")

	createRestoredCluster(t, ns, "restored", 3, etcdv1.RestoreSource{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "etcd/snap.db"}})
	waitSettled(t, ns, "restored", 3, 6*time.Minute)
	testrestore.Compare(t, src, dialClusterWith(t, ns, "restored", access{}), s.Status.Revision, 2000)
}

// A schedule every minute with keepLast 2, watched until it has taken four snapshots: exactly
// the two newest complete ones remain, in the API and in the bucket. Beside it, on the same
// cluster and in the same minutes: a suspended schedule every minute takes none, and a daily
// "30 3 * * *" in Asia/Kolkata (UTC+05:30, no daylight saving) plans its next run at 03:30
// on that zone's wall clock (22:00 UTC), not at 03:30 UTC.
func TestScheduleKeepsTheLastTwoSnapshots(t *testing.T) {
	t.Parallel()
	ns, bucket := s3Namespace(t)
	createCluster(t, ns, "source", 1)
	waitSettled(t, ns, "source", 1, 4*time.Minute)
	w := startWriter(t, ns, "source", "/writer")
	schedule := func(name, cron, zone string, suspend bool) {
		create(t, &etcdv1.EtcdSnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: corev1.LocalObjectReference{Name: "source"}, Schedule: cron, TimeZone: zone, Suspend: suspend,
				Destination: s3Location(t, bucket, name+"/"), Retention: etcdv1.SnapshotRetention{KeepLast: ptr(int32(2))}}})
	}
	schedule("minutely", "* * * * *", "", false)
	schedule("suspended", "* * * * *", "", true)
	schedule("kolkata", "30 3 * * *", "Asia/Kolkata", false)

	seen := map[string]bool{}
	eventually(t, 7*time.Minute, "four scheduled snapshots, the two newest kept", func() error {
		complete, err := completeSnapshots(ns, "minutely")
		if err != nil {
			return err
		}
		for _, name := range complete {
			seen[name] = true
		}
		stored := objects(t, bucket, "minutely/")
		var want []string
		for _, name := range complete {
			want = append(want, keyOf("minutely/", ns, "source", name))
		}
		keys := make([]string, 0, len(stored))
		for k := range stored {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Sort(want)
		switch {
		case len(seen) < 4:
			return fmt.Errorf("%d snapshots complete so far", len(seen))
		case len(complete) != 2:
			return fmt.Errorf("%d complete snapshots remain: %v", len(complete), complete)
		case !slices.Equal(keys, want):
			return fmt.Errorf("the bucket holds %v, the API %v", keys, want)
		}
		return nil
	})
	if st := getSchedule(t, ns, "minutely").Status; st.LastScheduleTime == nil || st.NextScheduleTime == nil || st.LastSuccessfulSnapshot == "" || st.LastFailure != nil {
		t.Fatalf("schedule status %+v", st)
	}
	w.stopAndVerify(t, 10)
	checkSuspendedAndZonedSchedules(t, ns, bucket)
}

// checkSuspendedAndZonedSchedules checks, once the minutely schedule ran four times, the
// schedules "suspended" and "kolkata" of TestScheduleKeepsTheLastTwoSnapshots.
func checkSuspendedAndZonedSchedules(t *testing.T, ns, bucket string) {
	t.Helper()
	// The suspended schedule was looked at (Ready says Suspended) and, through the minutes the
	// other one ran four times, started nothing. (Its status.active may name the other's
	// snapshot: it names whatever snapshot of the cluster runs.)
	suspended := getSchedule(t, ns, "suspended")
	ready := meta.FindStatusCondition(suspended.Status.Conditions, "Ready")
	if st := suspended.Status; ready == nil || ready.Reason != "Suspended" || st.LastScheduleTime != nil || st.NextScheduleTime != nil {
		t.Errorf("suspended schedule: Ready %+v, status %+v; want Suspended, no run and none planned", ready, st)
	}
	if names, err := snapshotsOf(ns, "suspended"); err != nil || len(names) != 0 {
		t.Errorf("the suspended schedule has snapshots %v (%v)", names, err)
	}
	if stored := objects(t, bucket, "suspended/"); len(stored) != 0 {
		t.Errorf("the suspended schedule stored %v", stored)
	}

	// The daily schedule's next run is the next 03:30 in Asia/Kolkata.
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	daily := getSchedule(t, ns, "kolkata")
	next := daily.Status.NextScheduleTime
	now := time.Now()
	if next == nil {
		t.Fatalf("the daily schedule has no next run: %+v", daily.Status)
	}
	if wall := next.In(kolkata); wall.Hour() != 3 || wall.Minute() != 30 || !next.After(now.Add(-time.Minute)) || next.Sub(now) > 24*time.Hour {
		t.Errorf("the daily schedule's next run is %s (%s in Asia/Kolkata), want the next 03:30 there after %s",
			next.UTC().Format(time.RFC3339), wall.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
}

func getSchedule(t *testing.T, ns, name string) *etcdv1.EtcdSnapshotSchedule {
	t.Helper()
	sc := &etcdv1.EtcdSnapshotSchedule{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, sc); err != nil {
		t.Fatal(err)
	}
	return sc
}

// snapshotsOf names the EtcdSnapshots the schedule created (labelled with its name), any
// phase.
func snapshotsOf(ns, schedule string) ([]string, error) {
	list := &etcdv1.EtcdSnapshotList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelSnapshotSchedule: schedule}); err != nil {
		return nil, err
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	return names, nil
}

// completeSnapshots names the Complete EtcdSnapshots of a namespace that the named schedule
// owns, checking each Complete one is owned by a schedule.
func completeSnapshots(ns, schedule string) ([]string, error) {
	list := &etcdv1.EtcdSnapshotList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var names []string
	for _, s := range list.Items {
		if s.Status.Phase != etcdv1.SnapshotComplete || !s.DeletionTimestamp.IsZero() {
			continue
		}
		ref := metav1.GetControllerOf(&s)
		if ref == nil || ref.Kind != "EtcdSnapshotSchedule" {
			return nil, fmt.Errorf("snapshot %s is not owned by its schedule: %v", s.Name, s.OwnerReferences)
		}
		if ref.Name == schedule {
			names = append(names, s.Name)
		}
	}
	return names, nil
}

// Snapshots that cannot succeed fail with a reason that names the fix, a Warning event, and
// leave nothing in the bucket; none is ever Complete.
func TestSnapshotFailuresSayWhy(t *testing.T) {
	t.Parallel()
	ns, bucket := s3Namespace(t)
	s3Secret(t, ns, "wrong-credentials", "not-the-secret")
	createCluster(t, ns, "source", 1)
	waitSettled(t, ns, "source", 1, 4*time.Minute)

	wrongCredentials := s3Location(t, bucket, "")
	wrongCredentials.S3.CredentialsSecretRef.Name = "wrong-credentials"
	missingSecret := s3Location(t, bucket, "")
	missingSecret.S3.CredentialsSecretRef.Name = "no-such-secret"
	cases := map[string]struct {
		cluster string
		dest    etcdv1.SnapshotLocation
		reason  string
	}{
		"missing-bucket":    {"source", s3Location(t, ns+"-missing", ""), "BucketNotFound"},
		"wrong-credentials": {"source", wrongCredentials, "CredentialsRejected"},
		"missing-secret":    {"source", missingSecret, "CredentialsSecretNotFound"},
		"missing-pvc":       {"source", etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "no-such-claim"}}, "PVCNotFound"},
		"missing-cluster":   {"no-such-cluster", s3Location(t, bucket, ""), "ClusterNotFound"},
	}
	for name, tc := range cases {
		createSnapshot(t, ns, name, tc.cluster, tc.dest)
	}
	for name, tc := range cases {
		s := waitSnapshotDone(t, ns, name, etcdv1.SnapshotFailed)
		ready := meta.FindStatusCondition(s.Status.Conditions, "Ready")
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != tc.reason || ready.Message == "" || s.Status.Artifact != nil {
			t.Errorf("%s: Ready %+v, artifact %+v; want False with reason %s", name, ready, s.Status.Artifact, tc.reason)
		}
		eventually(t, time.Minute, name+": a Warning event "+tc.reason, func() error { return warningAbout(ns, name, tc.reason) })
	}
	if stored := objects(t, bucket, ""); len(stored) != 0 {
		t.Errorf("failed snapshots left %v in the bucket", stored)
	}
}

// A cluster asked to restore a snapshot that cannot be used never comes up empty: it says
// RestoreFailed, naming the cause, and no member serves. The causes: a missing file, a file
// that is no snapshot, credentials the store refuses, a file altered after its snapshot
// recorded its checksum (read directly, and through its EtcdSnapshot), and a snapshotRef to
// an EtcdSnapshot that does not exist, is not Complete yet or failed.
func TestRestoreOfAMissingOrCorruptSnapshotFailsLoudly(t *testing.T) {
	t.Parallel()
	ns, bucket := s3Namespace(t)
	s3Secret(t, ns, "wrong-credentials", "not-the-secret")
	garbage := bytes.Repeat([]byte("not a snapshot "), 4096)
	if _, err := localS3(t).admin.PutObject(context.Background(), bucket, "corrupt.db", bytes.NewReader(garbage), int64(len(garbage)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	wrongCredentials := s3Location(t, bucket, "corrupt.db")
	wrongCredentials.S3.CredentialsSecretRef.Name = "wrong-credentials"
	type failure struct {
		source etcdv1.RestoreSource
		causes []string // the message names each
	}
	cases := map[string]failure{ // restored at once
		"missing":           {restoreFrom(s3Location(t, bucket, "no-such-snapshot.db")), []string{"SnapshotNotFound"}},
		"corrupt":           {restoreFrom(s3Location(t, bucket, "corrupt.db")), []string{"SnapshotCorrupt"}},
		"wrong-credentials": {restoreFrom(wrongCredentials), []string{"CredentialsRejected"}},
		"ref-missing":       {restoreFromSnapshot("no-such-snapshot"), []string{"EtcdSnapshot no-such-snapshot does not exist"}},
	}
	for name, f := range cases {
		createRestoredCluster(t, ns, name, 3, f.source)
	}
	// A snapshot of a cluster that never becomes available waits; one of no cluster fails.
	createSnapshot(t, ns, "pending", "missing", s3Location(t, bucket, "pending/"))
	createSnapshot(t, ns, "failed", "no-such-cluster", s3Location(t, bucket, "failed/"))
	// A real snapshot whose stored file is then replaced by another that passes etcd's own
	// integrity check: only the checksum recorded when the snapshot was taken tells them
	// apart. A copy keeps the checksum recorded in the object's metadata (for a restore from
	// the key); the snapshot's own file is replaced whole, so only the checksum in the
	// EtcdSnapshot's status catches it.
	createCluster(t, ns, "source", 1)
	waitSettled(t, ns, "source", 1, 4*time.Minute)
	loadKeys(t, dialClusterWith(t, ns, "source", access{}), "/load", 100)
	createSnapshot(t, ns, "snap", "source", s3Location(t, bucket, ""))
	recorded := waitSnapshotDone(t, ns, "snap", etcdv1.SnapshotComplete).Status.Artifact.Checksum
	waitSnapshotDone(t, ns, "failed", etcdv1.SnapshotFailed)
	another := withEtcdHash(bytes.Repeat([]byte("another database "), 4096))
	if _, err := s3Srv.admin.CopyObject(context.Background(), minio.CopyDestOptions{Bucket: bucket, Object: "copy.db"},
		minio.CopySrcOptions{Bucket: bucket, Object: keyOf("", ns, "source", "snap")}); err != nil {
		t.Fatal(err)
	}
	replaceKeepingMetadata(t, bucket, "copy.db", another)
	if _, err := s3Srv.admin.PutObject(context.Background(), bucket, keyOf("", ns, "source", "snap"), bytes.NewReader(another), int64(len(another)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	later := map[string]failure{
		"altered":     {restoreFrom(s3Location(t, bucket, "copy.db")), []string{"SnapshotCorrupt", recorded + " was recorded"}},
		"ref-altered": {restoreFromSnapshot("snap"), []string{"SnapshotCorrupt", recorded + " was recorded"}},
		"ref-pending": {restoreFromSnapshot("pending"), []string{"EtcdSnapshot pending is Pending, not Complete yet"}},
		"ref-failed":  {restoreFromSnapshot("failed"), []string{"EtcdSnapshot failed failed (ClusterNotFound"}},
	}
	for name, f := range later {
		createRestoredCluster(t, ns, name, 3, f.source)
		cases[name] = f
	}
	for name, f := range cases {
		eventually(t, 4*time.Minute, name+": Available=False RestoreFailed naming "+strings.Join(f.causes, ", "), func() error {
			c := getCluster(t, ns, name)
			cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionAvailable)
			if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "RestoreFailed" {
				return fmt.Errorf("Available %+v", cond)
			}
			for _, cause := range f.causes {
				if !strings.Contains(cond.Message, cause) {
					return fmt.Errorf("Available %+v does not name %q", cond, cause)
				}
			}
			return nil
		})
		eventually(t, time.Minute, name+": a Warning event RestoreFailed", func() error { return warningAbout(ns, name, "RestoreFailed") })
		c := getCluster(t, ns, name)
		if c.Status.ReadyMembers != 0 || c.Status.ClusterID != "" {
			t.Errorf("%s: %d ready members, cluster ID %q after a failed restore", name, c.Status.ReadyMembers, c.Status.ClusterID)
		}
		if err := noEtcdRuns(ns, name); err != nil {
			t.Errorf("%s: %v after a failed restore", name, err)
		}
	}
}

// withEtcdHash appends etcd's integrity hash (the sha256 of what precedes it), as etcd does to
// the snapshots it streams.
func withEtcdHash(body []byte) []byte {
	sum := sha256.Sum256(body)
	return append(slices.Clip(body), sum[:]...)
}

// replaceKeepingMetadata overwrites an object with data, keeping its user metadata (the
// checksum the snapshot agent recorded in it).
func replaceKeepingMetadata(t *testing.T, bucket, key string, data []byte) {
	t.Helper()
	ctx := context.Background()
	info, err := localS3(t).admin.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.UserMetadata) == 0 {
		t.Fatalf("%s has no recorded checksum to keep: %+v", key, info.Metadata)
	}
	if _, err := s3Srv.admin.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{UserMetadata: info.UserMetadata}); err != nil {
		t.Fatal(err)
	}
}

// noEtcdRuns fails when any Pod of the cluster has its etcd container running: a failed
// restore must leave no member that could serve.
func noEtcdRuns(ns, cluster string) error {
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{etcdv1.LabelCluster: cluster}); err != nil {
		return err
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == specs.ContainerName && (cs.State.Running != nil || cs.LastTerminationState.Terminated != nil) {
				return fmt.Errorf("Pod %s ran etcd (%+v)", p.Name, cs.State)
			}
		}
	}
	return nil
}

// A snapshot of the TLS journey's cluster with mutual TLS and root auth completes while a
// client logged in as root writes; a new cluster with the same TLS and auth settings restored
// from it holds the data, and root logs in with the same password (users, roles and the auth
// switch are data and come back with the snapshot).
func TestSnapshotOfATLSAndAuthCluster(t *testing.T) {
	t.Parallel()
	ns, bucket := s3Namespace(t)
	journeyCA(t, ns)
	applyJourney(t, ns, "etcd-cluster-auth.yaml")
	c := waitSettled(t, ns, journeyCluster, 3, 5*time.Minute)
	waitAuthEnabled(t, ns)
	password := string(getSecret(t, ns, "secure-root").Data["password"])
	asRoot := root(access{TLS: secretTLS(t, journeyAppClient(t, ns), clientServiceHost(ns, journeyCluster))}, password)
	w := startWriterWith(t, ns, journeyCluster, "/writer", asRoot)
	time.Sleep(2 * time.Second)
	createSnapshot(t, ns, "snap", journeyCluster, s3Location(t, bucket, ""))
	s := waitSnapshotDone(t, ns, "snap", etcdv1.SnapshotComplete)
	w.stopAndVerify(t, 10)
	checkComplete(t, s, c, "s3://"+bucket+"/"+keyOf("", ns, journeyCluster, "snap"))

	restored := c.Spec.DeepCopy()
	restored.Bootstrap = &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{Source: restoreFrom(s3Location(t, bucket, keyOf("", ns, journeyCluster, "snap")))}}
	create(t, &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "restored", Namespace: ns}, Spec: *restored})
	waitSettled(t, ns, "restored", 3, 6*time.Minute)
	src := dialClusterWith(t, ns, journeyCluster, asRoot)
	certOnly := access{TLS: secretTLS(t, journeyAppClient(t, ns), clientServiceHost(ns, "restored"))}
	testrestore.Compare(t, src, dialClusterWith(t, ns, "restored", root(certOnly, password)), s.Status.Revision, 10)
	// Auth came back with the data: a certificate alone may not write.
	if err := tryPut(ns, "restored", certOnly); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a write to the restored cluster without root's password: %v; want permission denied", err)
	}
}

// keyOf is the S3 key of a snapshot stored under a prefix (a key that is not a file name
// ending in .db): <prefix><namespace>/<cluster>/<name>.db.
func keyOf(prefix, ns, cluster, name string) string {
	return prefix + ns + "/" + cluster + "/" + name + ".db"
}

func objectExists(bucket, key string) (bool, error) {
	_, err := s3Srv.admin.StatObject(context.Background(), bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return false, err
	}
	return true, nil
}

// objectDeleted: the store answers that the object does not exist (not merely an error).
func objectDeleted(bucket, key string) error {
	_, err := s3Srv.admin.StatObject(context.Background(), bucket, key, minio.StatObjectOptions{})
	if code := minio.ToErrorResponse(err).Code; code != "NoSuchKey" {
		return fmt.Errorf("object %s is still there or unknown (%w)", key, err)
	}
	return nil
}

// warningAbout finds a Warning event of that reason regarding the named object.
func warningAbout(ns, name, reason string) error {
	list := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning && e.Reason == reason && e.Regarding.Name == name {
			return nil
		}
	}
	return fmt.Errorf("no Warning %s event regarding %s among %d events", reason, name, len(list.Items))
}
