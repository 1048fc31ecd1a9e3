package migrate

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/snapshotstore"
)

// The legacy etcd.aenix.io operator's backups (its api/v1alpha1 EtcdBackup and
// EtcdBackupSchedule, v0.4.x). An EtcdBackup ran one backup-agent Job that wrote
// <destination>/<backup name>-rev<revision>.db: on S3 under spec.destination.s3.key (a key
// prefix) with the credentials Secret's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, on a PVC
// under spec.destination.pvc.subPath; once Complete, status.snapshot records the exact file
// (uri s3://<bucket>/<key>, or file:///backup/data/<path> where the PVC was mounted at
// /backup/data), its size and its "sha256:<hex>" checksum. An EtcdBackupSchedule ran a
// CronJob writing <destination>/<schedule name>-<timestamp>.db, recorded by no object. The
// legacy operator never deleted a stored file.

// LegacyBackupGroup is the legacy backups' API group and version.
const LegacyBackupGroup = "etcd.aenix.io/v1alpha1"

// LegacyFileMount is where the legacy backup Job mounted a PVC destination.
const LegacyFileMount = "/backup/data"

type legacyBackup struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		ClusterRef  corev1.LocalObjectReference `json:"clusterRef"`
		Destination legacyDestination           `json:"destination"`
	} `json:"spec"`
	Status struct {
		Phase      string             `json:"phase"`
		Conditions []metav1.Condition `json:"conditions"`
		Snapshot   *struct {
			URI       string `json:"uri"`
			SizeBytes int64  `json:"sizeBytes"`
			Checksum  string `json:"checksum"`
		} `json:"snapshot"`
	} `json:"status"`
}

type legacySchedule struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		ClusterRef  corev1.LocalObjectReference `json:"clusterRef"`
		Schedule    string                      `json:"schedule"`
		Destination legacyDestination           `json:"destination"`
	} `json:"spec"`
}

type legacyDestination struct {
	S3 *struct {
		Endpoint             string                      `json:"endpoint"`
		Bucket               string                      `json:"bucket"`
		Key                  string                      `json:"key"`
		CredentialsSecretRef corev1.LocalObjectReference `json:"credentialsSecretRef"`
		Region               string                      `json:"region"`
		ForcePathStyle       bool                        `json:"forcePathStyle"`
	} `json:"s3"`
	PVC *struct {
		ClaimName string `json:"claimName"`
		SubPath   string `json:"subPath"`
	} `json:"pvc"`
}

// BackupsObserved is what `kubectl etcd migrate aenix-backups` read in one namespace.
type BackupsObserved struct {
	// Backups and Schedules are the legacy objects as the API server returned them.
	Backups, Schedules []map[string]any
	// Snapshots and SnapshotSchedules are this operator's, by name.
	Snapshots         map[string]*etcdv1.EtcdSnapshot
	SnapshotSchedules map[string]*etcdv1.EtcdSnapshotSchedule
	// Clusters are this operator's EtcdClusters, by name.
	Clusters map[string]bool
}

// BackupsPlan is what becomes of the legacy backups. Lines say it, one per legacy object,
// for the dry run. The legacy objects are left as they are.
type BackupsPlan struct {
	// Snapshots are the EtcdSnapshots to create with the status to write: Complete, with the
	// legacy file as the artifact.
	Snapshots []*etcdv1.EtcdSnapshot
	// Schedules are the EtcdSnapshotSchedules to create.
	Schedules []*etcdv1.EtcdSnapshotSchedule
	Lines     []string
	Refusals  []string
}

// ImportedFrom is the value of AnnotationImportedFrom for a legacy object of kind and name.
func ImportedFrom(kind, name string) string { return kind + ".etcd.aenix.io/" + name }

// PlanBackups maps each legacy EtcdBackup with a stored file to an EtcdSnapshot that records
// that file, and each legacy EtcdBackupSchedule to an EtcdSnapshotSchedule.
func PlanBackups(o BackupsObserved) BackupsPlan {
	var p BackupsPlan
	for _, raw := range o.Backups {
		var b legacyBackup
		if err := fromMap(raw, &b); err != nil {
			p.Refusals = append(p.Refusals, fmt.Sprintf("a legacy EtcdBackup could not be read: %v", err))
			continue
		}
		p.planBackup(o, &b)
	}
	for _, raw := range o.Schedules {
		var s legacySchedule
		if err := fromMap(raw, &s); err != nil {
			p.Refusals = append(p.Refusals, fmt.Sprintf("a legacy EtcdBackupSchedule could not be read: %v", err))
			continue
		}
		p.planSchedule(o, &s)
	}
	return p
}

func fromMap(raw map[string]any, into any) error {
	data, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, into)
}

func (p *BackupsPlan) planBackup(o BackupsObserved, b *legacyBackup) {
	name := b.Metadata.Name
	head := fmt.Sprintf("EtcdBackup %s", name)
	skip := func(why string) { p.Lines = append(p.Lines, fmt.Sprintf("%s: not imported: %s", head, why)) }
	snap := b.Status.Snapshot
	switch {
	case b.Status.Phase != "Complete":
		skip(fmt.Sprintf("it is %s, not Complete: it stored no file", orNone(b.Status.Phase)))
		return
	case snap == nil || snap.URI == "":
		skip("its status.snapshot does not record the file it wrote (the legacy operator reads it from the Job's log, which may have gone first); its file is <destination>/" + name + "-rev<revision>.db: restore it by that exact key with spec.bootstrap.restore.source.s3 or pvc")
		return
	case !strings.HasPrefix(snap.Checksum, snapshotstore.ChecksumPrefix):
		skip(fmt.Sprintf("its status.snapshot records no sha256 checksum (%q), which a restore checks the file against: restore %s by its location with spec.bootstrap.restore.source.s3 or pvc", snap.Checksum, snap.URI))
		return
	}
	loc, why := legacyFile(b.Spec.Destination, snap.URI)
	if why != "" {
		p.Refusals = append(p.Refusals, fmt.Sprintf("%s: %s", head, why))
		return
	}
	from := ImportedFrom("EtcdBackup", name)
	if have := o.Snapshots[name]; have != nil {
		switch {
		case have.Annotations[etcdv1.AnnotationImportedFrom] != from:
			p.Refusals = append(p.Refusals, fmt.Sprintf("%s: this operator's EtcdSnapshot %s exists and is not its import: rename one of them", head, name))
			return
		case have.Status.Phase == etcdv1.SnapshotComplete:
			p.Lines = append(p.Lines, fmt.Sprintf("%s: already imported as EtcdSnapshot %s, unchanged", head, name))
			return
		}
	}
	s := &etcdv1.EtcdSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.Metadata.Namespace, Labels: b.Metadata.Labels,
			Annotations: map[string]string{etcdv1.AnnotationImportedFrom: from}},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: b.Spec.ClusterRef, Destination: loc, DeletionPolicy: etcdv1.SnapshotRetain},
	}
	uri := snapshotstore.URI(loc)
	s.Status = etcdv1.EtcdSnapshotStatus{
		Phase:    etcdv1.SnapshotComplete,
		Artifact: &etcdv1.SnapshotArtifact{URI: uri, SizeBytes: snap.SizeBytes, Checksum: snap.Checksum},
		Revision: fileRevision(uri),
	}
	if c := meta.FindStatusCondition(b.Status.Conditions, "Complete"); c != nil {
		at := c.LastTransitionTime
		s.Status.CompletionTime = &at
	}
	s.Status.Conditions = []metav1.Condition{{Type: etcdv1.SnapshotConditionReady, Status: metav1.ConditionTrue, Reason: etcdv1.ReasonImported,
		Message: fmt.Sprintf("imported from the legacy EtcdBackup %s (etcd.aenix.io), which stored it at %s: %d bytes, %s", name, snap.URI, snap.SizeBytes, snap.Checksum)}}
	p.Snapshots = append(p.Snapshots, s)
	p.Lines = append(p.Lines, fmt.Sprintf("%s -> EtcdSnapshot %s: created Complete, recording the file %s (%d bytes, %s) with deletionPolicy Retain; no snapshot is taken, spec.bootstrap.restore.source.snapshotRef can name it",
		head, name, uri, snap.SizeBytes, snap.Checksum))
}

// legacyFile is the exact location of the file a legacy backup wrote (uri) under its
// destination: its S3 key, or its path in the PVC. Both end in .db, so that this operator
// takes them as the file itself, not as a prefix or directory.
func legacyFile(d legacyDestination, uri string) (etcdv1.SnapshotLocation, string) {
	switch {
	case d.S3 != nil:
		rest, ok := strings.CutPrefix(uri, "s3://"+d.S3.Bucket+"/")
		if !ok || rest == "" {
			return etcdv1.SnapshotLocation{}, fmt.Sprintf("its status.snapshot.uri %q is not an object of its bucket %s", uri, d.S3.Bucket)
		}
		s3, why := legacyS3(d, rest)
		if why != "" {
			return etcdv1.SnapshotLocation{}, why
		}
		if !strings.HasSuffix(rest, ".db") {
			return etcdv1.SnapshotLocation{}, fmt.Sprintf("its file %s does not end in .db, which this operator reads as a key prefix: copy the object to a key ending in .db and restore it by that key", uri)
		}
		return etcdv1.SnapshotLocation{S3: s3}, ""
	case d.PVC != nil:
		file, ok := strings.CutPrefix(uri, "file://"+LegacyFileMount+"/")
		file = path.Clean(file)
		if !ok || file == "." || strings.HasPrefix(file, "..") {
			return etcdv1.SnapshotLocation{}, fmt.Sprintf("its status.snapshot.uri %q is not a file under %s, where the legacy Job mounted PVC %s", uri, LegacyFileMount, d.PVC.ClaimName)
		}
		if !strings.HasSuffix(file, ".db") {
			return etcdv1.SnapshotLocation{}, fmt.Sprintf("its file %s on PVC %s does not end in .db, which this operator reads as a directory: rename it and restore it by its path", file, d.PVC.ClaimName)
		}
		return etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: d.PVC.ClaimName, SubPath: file}}, ""
	}
	return etcdv1.SnapshotLocation{}, "its spec.destination names neither s3 nor pvc"
}

// legacyS3 is the legacy S3 destination with key as the key: the same store, bucket and
// credentials Secret (which holds the same two keys this operator reads).
func legacyS3(d legacyDestination, key string) (*etcdv1.S3SnapshotLocation, string) {
	s := d.S3
	if !strings.HasPrefix(s.Endpoint, "http://") && !strings.HasPrefix(s.Endpoint, "https://") {
		return nil, fmt.Sprintf("its spec.destination.s3.endpoint %q is no http:// or https:// URL, which this operator needs", s.Endpoint)
	}
	return &etcdv1.S3SnapshotLocation{Endpoint: s.Endpoint, Bucket: s.Bucket, Key: key, CredentialsSecretRef: s.CredentialsSecretRef,
		Region: s.Region, ForcePathStyle: s.ForcePathStyle}, ""
}

var revisionSuffix = regexp.MustCompile(`-rev([0-9]+)\.db$`)

// fileRevision is the etcd revision the legacy agent put into the file's name (-rev<N>.db);
// 0 when there is none.
func fileRevision(file string) int64 {
	m := revisionSuffix.FindStringSubmatch(file)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// cronMacros are the cron shorthands a CronJob takes, as five fields.
var cronMacros = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
	"@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

func (p *BackupsPlan) planSchedule(o BackupsObserved, s *legacySchedule) {
	name, cluster := s.Metadata.Name, s.Spec.ClusterRef.Name
	head := fmt.Sprintf("EtcdBackupSchedule %s", name)
	refuse := func(why string) { p.Refusals = append(p.Refusals, fmt.Sprintf("%s: %s", head, why)) }
	from := ImportedFrom("EtcdBackupSchedule", name)
	if have := o.SnapshotSchedules[name]; have != nil {
		if have.Annotations[etcdv1.AnnotationImportedFrom] != from {
			refuse(fmt.Sprintf("this operator's EtcdSnapshotSchedule %s exists and is not its import: rename one of them", name))
			return
		}
		p.Lines = append(p.Lines, fmt.Sprintf("%s: already imported as EtcdSnapshotSchedule %s, unchanged", head, name))
		return
	}
	if !o.Clusters[cluster] {
		refuse(fmt.Sprintf("its cluster %s is no EtcdCluster of this operator yet: migrate it first (kubectl etcd migrate aenix %s), then run this again", cluster, cluster))
		return
	}
	schedule := strings.TrimSpace(s.Spec.Schedule)
	if five, ok := cronMacros[schedule]; ok {
		schedule = five
	}
	if len(strings.Fields(schedule)) != 5 || strings.Contains(schedule, "TZ=") {
		refuse(fmt.Sprintf("its schedule %q is no 5-field cron expression (minute hour day-of-month month day-of-week); create the EtcdSnapshotSchedule by hand with spec.schedule and spec.timeZone", s.Spec.Schedule))
		return
	}
	var dest etcdv1.SnapshotLocation
	var where string
	switch d := s.Spec.Destination; {
	case d.S3 != nil:
		if strings.HasSuffix(d.S3.Key, ".db") {
			refuse(fmt.Sprintf("its spec.destination.s3.key %q ends in .db: this operator takes a schedule's key as a prefix under which each snapshot gets its own key", d.S3.Key))
			return
		}
		s3, why := legacyS3(d, d.S3.Key)
		if why != "" {
			refuse(why)
			return
		}
		dest.S3 = s3
		where = fmt.Sprintf("s3://%s/%s", s3.Bucket, path.Join(s3.Key, s.Metadata.Namespace, cluster, "<snapshot>.db"))
	case d.PVC != nil:
		dest.PVC = &etcdv1.PVCSnapshotLocation{ClaimName: d.PVC.ClaimName, SubPath: d.PVC.SubPath}
		where = fmt.Sprintf("pvc://%s/%s", d.PVC.ClaimName, path.Join(d.PVC.SubPath, "<snapshot>.db"))
	default:
		refuse("its spec.destination names neither s3 nor pvc")
		return
	}
	p.Schedules = append(p.Schedules, &etcdv1.EtcdSnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Metadata.Namespace, Labels: s.Metadata.Labels,
			Annotations: map[string]string{etcdv1.AnnotationImportedFrom: from}},
		Spec: etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: s.Spec.ClusterRef, Schedule: schedule, Destination: dest,
			// The legacy operator kept every file: so does this schedule until spec.retention says otherwise.
			DeletionPolicy: etcdv1.SnapshotRetain},
	})
	p.Lines = append(p.Lines, fmt.Sprintf("%s -> EtcdSnapshotSchedule %s: created, schedule %q in UTC, snapshots of %s to %s, every one kept (no spec.retention, deletionPolicy Retain, as the legacy schedule kept its files); set spec.timeZone if kube-controller-manager, which ran the legacy CronJob, is not on UTC. The files it wrote (<destination>/%s-<timestamp>.db) stay where they are and no object records them: restore one by its exact key or path with spec.bootstrap.restore.source.s3 or pvc",
		head, name, schedule, cluster, where, name))
}

// Describe prints the plan as the dry run shows it.
func (p BackupsPlan) Describe() string {
	var b strings.Builder
	lines := append([]string(nil), p.Lines...)
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	for _, r := range p.Refusals {
		fmt.Fprintf(&b, "  refused: %s\n", r)
	}
	if len(p.Lines)+len(p.Refusals) > 0 {
		fmt.Fprintf(&b, "  the legacy EtcdBackups and EtcdBackupSchedules are left as they are: delete them yourself once done. A legacy EtcdBackupSchedule's CronJob keeps taking backups until its EtcdBackupSchedule is deleted (the CronJob goes with it)\n")
	}
	return b.String()
}
