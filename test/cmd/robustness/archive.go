package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// The archive scenario: the cluster's schedule archives every change to the local cluster's
// MinIO (spec.archive, a segment a second) while the workload runs, and three faults come in
// turn: a member lost with its data, the operator killed, the store unreachable for the
// archiver for storeOutage. After each, once the archive claims a window past the cluster's
// revision, two one-member clusters are restored from it in the background (while the next
// fault runs): one to the window's latest revision, one to a whole second inside it. What
// each holds of the workload's keys is checked against the whole history at the revision it
// reached (robustness.CheckRestoredAt): the archive never claims a window it cannot restore.

const (
	archiveSchedule = "rb-archive"
	s3Secret        = "s3-credentials"
	// storeOutage is how long the store is unreachable for the archiver.
	storeOutage = 20 * time.Second
	// restoreTimeout bounds each restore, from the cluster's creation to its keys read.
	restoreTimeout = 4 * time.Minute
)

// archiveFaults are the archive scenario's faults, one per trial, in this order.
var archiveFaults = []struct {
	name   string
	inject func(context.Context, *trialEnv) error
}{
	{"member lost", dataLossTrial},
	{"operator killed", operatorKilledWhileArchiving},
	{"store unreachable", storeUnreachable},
}

// archiveTrial injects the trial's fault, waits until the archive's window covers the
// cluster's revision after it, and starts the restores that check the window claimed.
func archiveTrial(ctx context.Context, t *trialEnv) error {
	f := archiveFaults[t.index%len(archiveFaults)]
	if err := f.inject(ctx, t); err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	var rev int64
	if err := poll(ctx, time.Minute, "the cluster's revision", func(ctx context.Context) (err error) {
		rev, err = t.c.revision(ctx)
		return err
	}); err != nil {
		return err
	}
	w, err := t.c.waitWindow(ctx, rev)
	if err != nil {
		return fmt.Errorf("after %s: %w", f.name, err)
	}
	logf("trial %d (%s): the archive claims revisions %d to %d (%s to %s)", t.index, f.name, w.Earliest.Revision, w.Latest.Revision,
		w.Earliest.Time.Format(time.RFC3339), w.Latest.Time.Format(time.RFC3339))
	t.archive.restore(ctx, t.c, fmt.Sprintf("at-%d-latest", t.index), f.name, *w, etcdv1.RestoreTarget{Revision: &w.Latest.Revision})
	if inside, ok := insideWindow(*w, t.rnd.Int64N); ok {
		t.archive.restore(ctx, t.c, fmt.Sprintf("at-%d-inside", t.index), f.name, *w, etcdv1.RestoreTarget{Time: &inside})
	} else {
		mid := w.Earliest.Revision + (w.Latest.Revision-w.Earliest.Revision)/2
		t.archive.restore(ctx, t.c, fmt.Sprintf("at-%d-inside", t.index), f.name, *w, etcdv1.RestoreTarget{Revision: &mid})
	}
	return nil
}

// insideWindow is a whole second strictly after the window's earliest time and at or before
// its latest, chosen with n; false when the window spans no such second.
func insideWindow(w etcdv1.RestoreWindow, n func(int64) int64) (metav1.Time, bool) {
	if w.Earliest.Time == nil || w.Latest.Time == nil {
		return metav1.Time{}, false
	}
	first := w.Earliest.Time.Truncate(time.Second).Add(time.Second)
	last := w.Latest.Time.Truncate(time.Second)
	if last.Before(first) {
		return metav1.Time{}, false
	}
	span := int64(last.Sub(first)/time.Second) + 1
	return metav1.NewTime(first.Add(time.Duration(n(span)) * time.Second)), true
}

// operatorKilledWhileArchiving kills the operator (the archiver runs on; the window is the
// operator's to write) and waits until the cluster's status is settled. That the operator
// came back is what archiveTrial waits for next: a window past a revision read after the
// kill, which only the new operator can have written.
func operatorKilledWhileArchiving(ctx context.Context, t *trialEnv) error {
	logf("trial %d: operator killed while archiving", t.index)
	if _, err := robustness.KillOperator(ctx, t.c.e.k8s); err != nil {
		return err
	}
	return t.c.waitSettled(ctx, t.replicas, time.Time{})
}

// storeUnreachable drops every packet of the archiver's Pod to the store's address and port
// (an nftables table in the Pod's network namespace: etcd, the API server and DNS stay
// reachable, and so does the store for everyone else) for storeOutage, and for as long as it
// takes the schedule's status.archive.storeError to say so (the archiver's writes hang rather
// than fail, and it gives each up after its deadline, 18s with the scenario's segments), then
// lets them through again and waits until storeError is cleared by a write that succeeded.
// The status must not be silent meanwhile: storeError set within storeErrorWithin and a lag
// reported with it that covers the outage so far. That the outage was real is checked in the
// store: from a few seconds into it (a segment on its way may still land) to its end, the
// archive's segments must not grow by more than one segment and its checksum, where the
// workload fills a segment a second.
func storeUnreachable(ctx context.Context, t *trialEnv) (err error) {
	s3, err := localS3()
	if err != nil {
		return err
	}
	pod, err := t.c.archiverPod(ctx)
	if err != nil {
		return err
	}
	netns := localclusterNetns(pod)
	logf("trial %d: the store (%s) unreachable for the archiver %s (network namespace %s) for %s", t.index, s3.addr, pod.Name, netns, storeOutage)
	if err := robustness.DropTo(netns, s3.addr); err != nil {
		return err
	}
	dropped := time.Now()
	undropped := false
	defer func() {
		if !undropped {
			err = cmp.Or(err, robustness.UndropTo(netns))
		}
	}()
	const settle = 5 * time.Second
	time.Sleep(settle)
	before, errBefore := s3.objects(ctx, t.c.ns)
	reported, err := t.c.waitStoreError(ctx, true)
	if err != nil {
		return fmt.Errorf("during the outage: %w", err)
	}
	logf("trial %d: %s into the outage: storeError %q, lag %v", t.index, time.Since(dropped).Round(time.Second), reported.StoreError, reported.Lag)
	// The newest moment stored is before the drop, so the lag reported with the error covers
	// the outage up to the settle at least.
	if reported.Lag == nil || reported.Lag.Duration < settle {
		return fmt.Errorf("during the outage storeError is %q but the lag %v", reported.StoreError, reported.Lag)
	}
	time.Sleep(time.Until(dropped.Add(storeOutage)))
	after, errAfter := s3.objects(ctx, t.c.ns)
	undropped = true
	if err := robustness.UndropTo(netns); err != nil {
		return err
	}
	if err := cmp.Or(errBefore, errAfter); err != nil {
		return fmt.Errorf("listing the bucket: %w", err)
	}
	logf("trial %d: %d objects in the bucket %s into the outage, %d at its end (%s)", t.index, before, settle, after, time.Since(dropped).Round(time.Second))
	if after-before > 2 {
		return fmt.Errorf("the archiver stored %d objects during the outage: the store was not unreachable for it", after-before)
	}
	if _, err := t.c.waitStoreError(ctx, false); err != nil {
		return fmt.Errorf("after the outage: %w", err)
	}
	return nil
}

// storeErrorWithin bounds the wait for status.archive.storeError to be set once the store is
// unreachable (the archiver's deadline, 18s, and its report) and to clear once it is back (a
// retry's backoff, 30s at most, and the write).
const storeErrorWithin = 2 * time.Minute

// waitStoreError waits until the schedule's status.archive.storeError is set (set) or empty
// (!set), and returns status.archive then.
func (c *cluster) waitStoreError(ctx context.Context, set bool) (*etcdv1.ArchiveStatus, error) {
	var st *etcdv1.ArchiveStatus
	what := "status.archive.storeError set"
	if !set {
		what = "status.archive.storeError cleared"
	}
	err := poll(ctx, storeErrorWithin, what, func(ctx context.Context) error {
		sc, err := c.schedule(ctx)
		if err != nil {
			return err
		}
		a := sc.Status.Archive
		if a == nil || (a.StoreError != "") != set {
			return fmt.Errorf("status.archive %+v", a)
		}
		st = a.DeepCopy()
		return nil
	})
	return st, err
}

// objects counts the objects in the bucket.
func (s *s3Env) objects(ctx context.Context, bucket string) (int, error) {
	mc, err := s.client()
	if err != nil {
		return 0, err
	}
	n := 0
	for obj := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			return 0, obj.Err
		}
		n++
	}
	return n, nil
}

func (s *s3Env) client() (*minio.Client, error) {
	return minio.New(s.addr.String(), &minio.Options{Creds: credentials.NewStaticV4(s.accessKey, s.secretKey, ""), Region: "us-east-1"})
}

// s3Env is the local cluster's MinIO, as make local-up wrote it in s3.env.
type s3Env struct {
	endpoint, accessKey, secretKey string
	addr                           netip.AddrPort
}

func localS3() (*s3Env, error) {
	dir := cmp.Or(os.Getenv("LOCALCLUSTER_DIR"), "/var/lib/etcd-operator-localcluster")
	f, err := os.Open(filepath.Join(dir, "s3.env"))
	if err != nil {
		return nil, fmt.Errorf("the local cluster's MinIO (LOCALCLUSTER_ADDONS=\"cert-manager minio\", as hack/robustness.sh sets): %w", err)
	}
	defer f.Close() // read-only
	env := map[string]string{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	s := &s3Env{endpoint: env["S3_ENDPOINT"], accessKey: env["AWS_ACCESS_KEY_ID"], secretKey: env["AWS_SECRET_ACCESS_KEY"]}
	u, err := url.Parse(s.endpoint)
	if err != nil {
		return nil, fmt.Errorf("%s/s3.env: %w", dir, err)
	}
	if s.accessKey == "" {
		return nil, fmt.Errorf("%s/s3.env names no credentials", dir)
	}
	if s.addr, err = netip.ParseAddrPort(u.Host); err != nil {
		return nil, fmt.Errorf("the store's endpoint %s: %w", s.endpoint, err)
	}
	return s, nil
}

// setUpArchive makes a bucket named after the namespace, the credentials Secret and the
// schedule with spec.archive (its cron daily: the base snapshot the archive asks for is its
// only one), and waits until the archive claims a window.
func (c *cluster) setUpArchive(ctx context.Context) error {
	s3, err := localS3()
	if err != nil {
		return err
	}
	mc, err := s3.client()
	if err != nil {
		return err
	}
	if err := mc.MakeBucket(ctx, c.ns, minio.MakeBucketOptions{}); err != nil {
		return fmt.Errorf("making bucket %s: %w", c.ns, err)
	}
	if err := c.e.k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: s3Secret},
		StringData: map[string]string{"AWS_ACCESS_KEY_ID": s3.accessKey, "AWS_SECRET_ACCESS_KEY": s3.secretKey}}); err != nil {
		return err
	}
	sc := &etcdv1.EtcdSnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: archiveSchedule},
		Spec: etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: corev1.LocalObjectReference{Name: c.name}, Schedule: "0 3 * * *",
			Destination: etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{Endpoint: s3.endpoint, Bucket: c.ns, Key: "archive/",
				CredentialsSecretRef: corev1.LocalObjectReference{Name: s3Secret}, Region: "us-east-1", ForcePathStyle: true}},
			Archive: &etcdv1.SnapshotArchive{SegmentInterval: &metav1.Duration{Duration: time.Second}}}}
	if err := c.e.k8s.Create(ctx, sc); err != nil {
		return err
	}
	_, err = c.waitWindow(ctx, 0)
	return err
}

func (c *cluster) schedule(ctx context.Context) (*etcdv1.EtcdSnapshotSchedule, error) {
	sc := &etcdv1.EtcdSnapshotSchedule{}
	return sc, c.e.k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: archiveSchedule}, sc)
}

// waitWindow waits until the schedule claims a window whose latest revision is at least rev.
func (c *cluster) waitWindow(ctx context.Context, rev int64) (*etcdv1.RestoreWindow, error) {
	var w *etcdv1.RestoreWindow
	err := poll(ctx, 3*time.Minute, fmt.Sprintf("the archive's window past revision %d", rev), func(ctx context.Context) error {
		sc, err := c.schedule(ctx)
		if err != nil {
			return err
		}
		a := sc.Status.Archive
		if a == nil || a.Window == nil {
			return fmt.Errorf("no window: %+v", a)
		}
		if a.Window.Latest.Revision < rev {
			return fmt.Errorf("window %d to %d (storeError %q, lastGap %+v)", a.Window.Earliest.Revision, a.Window.Latest.Revision, a.StoreError, a.LastGap)
		}
		w = a.Window.DeepCopy()
		return nil
	})
	return w, err
}

// archiverPod is the schedule's archiver Pod that is running and not going away.
func (c *cluster) archiverPod(ctx context.Context) (*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.e.k8s.List(ctx, list, client.InNamespace(c.ns), client.MatchingLabels{etcdv1.LabelArchiverOf: archiveSchedule}); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if p := &list.Items[i]; p.DeletionTimestamp.IsZero() && p.Status.Phase == corev1.PodRunning {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no running archiver Pod among %d", len(list.Items))
}

// restored is what one restore reached: the revision and the workload's keys.
type restored struct {
	name, fault string
	window      etcdv1.RestoreWindow
	target      etcdv1.RestoreTarget
	revision    int64
	keys        map[string]robustness.RestoredKey
	err         error
}

// archiveRestores are the restores a scenario started, running in the background.
type archiveRestores struct {
	prefix string
	wg     sync.WaitGroup
	mu     sync.Mutex
	done   []restored
}

// restore creates the one-member cluster name restored from the schedule to target and, in
// the background, waits until it serves, reads the workload's keys and deletes it again.
func (a *archiveRestores) restore(ctx context.Context, src *cluster, name, fault string, w etcdv1.RestoreWindow, target etcdv1.RestoreTarget) {
	logf("restoring %s to %s", name, describeTarget(target))
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		r := restored{name: name, fault: fault, window: w, target: target}
		r.revision, r.keys, r.err = a.restoreAndRead(ctx, &cluster{e: src.e, ns: src.ns, name: name}, target)
		a.mu.Lock()
		a.done = append(a.done, r)
		a.mu.Unlock()
	}()
}

func (a *archiveRestores) restoreAndRead(ctx context.Context, c *cluster, target etcdv1.RestoreTarget) (int64, map[string]robustness.RestoredKey, error) {
	ctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	defer cancel()
	one := int32(1)
	ec := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name}, Spec: etcdv1.EtcdClusterSpec{
		Replicas: &one, Version: etcdVersion, Bootstrap: &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{
			Source: etcdv1.RestoreSource{ScheduleRef: &corev1.LocalObjectReference{Name: archiveSchedule}}, Target: &target}}}}
	if err := c.e.k8s.Create(ctx, ec); err != nil {
		return 0, nil, err
	}
	defer func() {
		if err := c.e.k8s.Delete(context.WithoutCancel(ctx), ec); client.IgnoreNotFound(err) != nil {
			logf("deleting %s: %v", c.name, err)
		}
	}()
	if err := c.waitSettled(ctx, 1, time.Time{}); err != nil {
		return 0, nil, err
	}
	clients, err := c.dial(ctx, 1)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = clients[0].Close() }()
	var resp *clientv3.GetResponse
	if err := poll(ctx, time.Minute, c.name+" read", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err = clients[0].Get(ctx, a.prefix+"/", clientv3.WithPrefix())
		return err
	}); err != nil {
		return 0, nil, err
	}
	keys := map[string]robustness.RestoredKey{}
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = robustness.RestoredKey{Value: string(kv.Value), ModRevision: kv.ModRevision}
	}
	return resp.Header.Revision, keys, nil
}

func describeTarget(t etcdv1.RestoreTarget) string {
	if t.Revision != nil {
		return fmt.Sprintf("revision %d", *t.Revision)
	}
	return "time " + t.Time.UTC().Format(time.RFC3339)
}

// check waits for every restore and checks each against the history: a restore to a
// revision reaches exactly it; one to a time reaches a revision inside the window claimed;
// and what each holds is the history at the revision it reached.
func (a *archiveRestores) check(r *row, ops []robustness.Operation) {
	a.wg.Wait()
	for _, res := range a.done {
		var bad []string
		switch {
		case res.err != nil:
			bad = []string{fmt.Sprintf("restore failed: %v", res.err)}
		case res.target.Revision != nil && res.revision != *res.target.Revision:
			bad = []string{fmt.Sprintf("reached revision %d", res.revision)}
		case res.revision < res.window.Earliest.Revision || res.revision > res.window.Latest.Revision:
			bad = []string{fmt.Sprintf("reached revision %d, outside the window claimed", res.revision)}
		}
		if res.err == nil {
			bad = append(bad, robustness.CheckRestoredAt(ops, res.revision, res.keys)...)
		}
		r.restores++
		r.archive += len(bad)
		for _, b := range bad {
			r.details = append(r.details, fmt.Sprintf("after %s, window %d to %d, %s restored to %s: %s", res.fault,
				res.window.Earliest.Revision, res.window.Latest.Revision, res.name, describeTarget(res.target), b))
		}
		logf("%s (after %s) restored to %s: revision %d, %d keys, %d violations", res.name, res.fault, describeTarget(res.target), res.revision, len(res.keys), len(bad))
	}
}
