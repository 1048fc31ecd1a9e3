// Package backup stores etcd snapshot files in an S3-compatible bucket or in a directory of a
// mounted PersistentVolumeClaim, and reads them back. It knows where a snapshot of a given
// name lives (reproducible from the spec and the name), how to write one so that a partial
// file never looks complete, and how to tell the failures a person can fix apart.
package snapshotstore

import (
	"path"
	"strings"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// SnapshotFileName is the file a snapshot of the given name is stored as.
func SnapshotFileName(snapshot string) string { return snapshot + ".db" }

// FileOf names the snapshot a file is of: its namespace, its cluster and its own name.
type FileOf struct{ Namespace, Cluster, Name string }

// Of is the file of EtcdSnapshot s.
func Of(s *etcdv1.EtcdSnapshot) FileOf {
	return FileOf{Namespace: s.Namespace, Cluster: s.Spec.ClusterRef.Name, Name: s.Name}
}

// ObjectKey is the S3 key of snapshot f under the destination's key: a key ending in ".db" is
// used as it is; any other key is a prefix (a directory) under which the file goes to
// <namespace>/<cluster>/<name>.db. One bucket and prefix serve every namespace and cluster
// without two snapshots of one name sharing a key; an EtcdSnapshot's name is unique only in
// its namespace.
func ObjectKey(prefix string, f FileOf) string {
	if strings.HasSuffix(prefix, ".db") {
		return prefix
	}
	return path.Join(prefix, f.Namespace, f.Cluster, SnapshotFileName(f.Name))
}

// legacyObjectKey is where operators before the namespace and cluster were in the key put a
// snapshot's file: <prefix>/<name>.db. Snapshots they completed keep that key in their
// status.artifact, and are restored and deleted by it (LocationOf).
func legacyObjectKey(prefix, snapshot string) string {
	if strings.HasSuffix(prefix, ".db") {
		return prefix
	}
	if prefix == "" {
		return SnapshotFileName(snapshot)
	}
	return strings.TrimSuffix(prefix, "/") + "/" + SnapshotFileName(snapshot)
}

// FilePath is the path, relative to the volume's root, of snapshot f under the
// destination's subPath (a directory). A PVC belongs to one namespace, and a name is unique
// there, so the layout has neither.
func FilePath(subPath string, f FileOf) string {
	if strings.HasSuffix(subPath, ".db") {
		return subPath
	}
	return path.Join(subPath, SnapshotFileName(f.Name))
}

// FileLocation narrows a destination to snapshot f's own file: its exact S3 key (ObjectKey)
// or its exact path in the volume (FilePath), the rest of the destination kept.
func FileLocation(loc etcdv1.SnapshotLocation, f FileOf) etcdv1.SnapshotLocation {
	out := *loc.DeepCopy()
	switch {
	case out.S3 != nil:
		out.S3.Key = ObjectKey(out.S3.Key, f)
	case out.PVC != nil:
		out.PVC.SubPath = FilePath(out.PVC.SubPath, f)
	}
	return out
}

// LocationOf is the file location of snapshot f whose URI is uri: where this operator puts
// it (FileLocation), or, on S3, where operators before the namespace and cluster were in
// the key put it. False when uri is neither: it names no file of this snapshot.
func LocationOf(loc etcdv1.SnapshotLocation, f FileOf, uri string) (etcdv1.SnapshotLocation, bool) {
	if now := FileLocation(loc, f); URI(now) == uri {
		return now, true
	}
	if loc.S3 != nil {
		before := *loc.DeepCopy()
		before.S3.Key = legacyObjectKey(loc.S3.Key, f.Name)
		if URI(before) == uri {
			return before, true
		}
	}
	return etcdv1.SnapshotLocation{}, false
}

// URI names a file location: s3://bucket/key or pvc://claim/path.
func URI(file etcdv1.SnapshotLocation) string {
	switch {
	case file.S3 != nil:
		return "s3://" + file.S3.Bucket + "/" + file.S3.Key
	case file.PVC != nil:
		return "pvc://" + file.PVC.ClaimName + "/" + file.PVC.SubPath
	}
	return ""
}

// DestinationURI is where snapshot f is stored for a destination: s3://bucket/key or
// pvc://claim/path.
func DestinationURI(loc etcdv1.SnapshotLocation, f FileOf) string {
	return URI(FileLocation(loc, f))
}

// ArchivePrefix is where the archive of schedule (spec.archive) of a cluster goes under the
// schedule's destination, next to its snapshots: <prefix>/<namespace>/<cluster>/<schedule>
// .archive on S3, <directory>/<schedule>.archive on a PVC. No snapshot file ends so.
func ArchivePrefix(dest etcdv1.SnapshotLocation, namespace, cluster, schedule string) string {
	switch {
	case dest.S3 != nil:
		return path.Join(dest.S3.Key, namespace, cluster, schedule+".archive")
	case dest.PVC != nil:
		return path.Join(dest.PVC.SubPath, schedule+".archive")
	}
	return ""
}
