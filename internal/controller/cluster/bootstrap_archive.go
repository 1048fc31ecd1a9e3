package cluster

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// chooseBase is the snapshot a restore to target starts from: of the Complete snapshots
// given, the newest at or before it: for a revision, the newest whose revision is at most it;
// for a time, the newest that completed at or before it (all it holds was written before it
// completed). Nil when none is.
func chooseBase(snaps []etcdv1.EtcdSnapshot, target etcdv1.RestoreTarget) *etcdv1.EtcdSnapshot {
	var best *etcdv1.EtcdSnapshot
	for i := range snaps {
		s := &snaps[i]
		if s.Status.Phase != etcdv1.SnapshotComplete || s.Status.Revision == 0 || s.Status.CompletionTime == nil || !s.DeletionTimestamp.IsZero() {
			continue
		}
		switch {
		case target.Revision != nil && s.Status.Revision > *target.Revision:
			continue
		case target.Time != nil && s.Status.CompletionTime.After(target.Time.Time):
			continue
		}
		if best == nil || s.Status.Revision > best.Status.Revision {
			best = s
		}
	}
	return best
}

// describeTarget names a target in messages.
func describeTarget(t etcdv1.RestoreTarget) string {
	if t.Revision != nil {
		return fmt.Sprintf("revision %d", *t.Revision)
	}
	return t.Time.UTC().Format(time.RFC3339Nano)
}

// resolveArchiveRestore is what the founding member restores for spec.bootstrap.restore
// .target with source.scheduleRef: the schedule's newest Complete snapshot at or before the
// target (chooseBase; its file and recorded checksum, as for a snapshotRef) with the
// schedule's archive and the target. Or why not yet: the schedule is missing or has no
// archive, no snapshot is at or before the target, or the archive does not reach it yet (the
// restore starts once it does).
func resolveArchiveRestore(c *etcdv1.EtcdCluster, sc *etcdv1.EtcdSnapshotSchedule, snaps []etcdv1.EtcdSnapshot) (*etcdv1.MemberRestore, string) {
	spec := c.Spec.Bootstrap.Restore
	name, target := spec.Source.ScheduleRef.Name, *spec.Target
	const recreate = "or delete this EtcdCluster and create it again with another target (spec.bootstrap cannot change)"
	switch {
	case sc == nil:
		return nil, fmt.Sprintf("spec.bootstrap.restore.source.scheduleRef: EtcdSnapshotSchedule %s does not exist in namespace %s: create it, %s", name, c.Namespace, recreate)
	case sc.Spec.Archive == nil:
		return nil, fmt.Sprintf("spec.bootstrap.restore.source.scheduleRef: EtcdSnapshotSchedule %s has no spec.archive: nothing can be restored to a point between its snapshots; set it, %s", name, recreate)
	}
	base := chooseBase(snaps, target)
	if base == nil {
		return nil, fmt.Sprintf("spec.bootstrap.restore.target %s: EtcdSnapshotSchedule %s has no Complete snapshot at or before it (%s), %s",
			describeTarget(target), name, describeWindow(sc), recreate)
	}
	if why := beyondWindow(sc, target); why != "" {
		return nil, fmt.Sprintf("spec.bootstrap.restore.target %s: %s: the restore starts once it does, %s", describeTarget(target), why, recreate)
	}
	restore := snapshotFile(base)
	if restore == nil {
		return nil, fmt.Sprintf("spec.bootstrap.restore.target %s: EtcdSnapshot %s, the newest before it, records no verifiable file (status.artifact %s), %s",
			describeTarget(target), base.Name, describeArtifact(base.Status.Artifact), recreate)
	}
	restore.Archive = &etcdv1.MemberRestoreArchive{Prefix: specs.ArchivePrefix(sc)}
	if target.Revision != nil {
		restore.Archive.Revision = *target.Revision
	} else {
		restore.Archive.Time = target.Time.DeepCopy()
	}
	return restore, ""
}

// beyondWindow says why the archive does not reach target yet; "" when it does.
func beyondWindow(sc *etcdv1.EtcdSnapshotSchedule, target etcdv1.RestoreTarget) string {
	var latest *etcdv1.RestorePoint
	if st := sc.Status.Archive; st != nil && st.Window != nil {
		latest = &st.Window.Latest
	}
	switch {
	case latest == nil:
		return fmt.Sprintf("EtcdSnapshotSchedule %s reports no window yet", sc.Name)
	case target.Revision != nil && *target.Revision > latest.Revision:
		return fmt.Sprintf("the archive of EtcdSnapshotSchedule %s reaches revision %d", sc.Name, latest.Revision)
	case target.Time != nil && (latest.Time == nil || latest.Time.Before(target.Time)):
		return fmt.Sprintf("the archive of EtcdSnapshotSchedule %s reaches %s", sc.Name, timeText(latest.Time))
	}
	return ""
}

func describeWindow(sc *etcdv1.EtcdSnapshotSchedule) string {
	if st := sc.Status.Archive; st != nil && st.Window != nil {
		w := st.Window
		return fmt.Sprintf("its window is revision %d (%s) to revision %d (%s)", w.Earliest.Revision, timeText(w.Earliest.Time), w.Latest.Revision, timeText(w.Latest.Time))
	}
	return "it reports no window yet"
}

func timeText(t *metav1.Time) string {
	if t == nil {
		return "time unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

// observeArchiveRestore reads the schedule a scheduleRef names and its snapshots from the
// cache, and resolves the restore to the target.
func (r *Reconciler) observeArchiveRestore(ctx context.Context, c *etcdv1.EtcdCluster) (*etcdv1.MemberRestore, string, error) {
	name := c.Spec.Bootstrap.Restore.Source.ScheduleRef.Name
	sc := &etcdv1.EtcdSnapshotSchedule{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, sc); {
	case apierrors.IsNotFound(err):
		src, failure := resolveArchiveRestore(c, nil, nil)
		return src, failure, nil
	case err != nil:
		return nil, "", err
	}
	list := &etcdv1.EtcdSnapshotList{}
	if err := r.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1.LabelSnapshotSchedule: name}); err != nil {
		return nil, "", err
	}
	src, failure := resolveArchiveRestore(c, sc, list.Items)
	return src, failure, nil
}
