// Package backup stores etcd snapshot files in an S3-compatible bucket or in a directory of a
// mounted PersistentVolumeClaim, and reads them back. It knows where a snapshot of a given
// name lives (reproducible from the spec and the name), how to write one so that a partial
// file never looks complete, and how to tell the failures a person can fix apart.
package backup

import (
	"path"
	"strings"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// SnapshotFileName is the file a snapshot of the given name is stored as.
func SnapshotFileName(snapshot string) string { return snapshot + ".db" }

// ObjectKey is the S3 key of snapshot under the destination's key: a key ending in ".db" is
// used as it is; any other key is a prefix (a directory) the snapshot's file goes into.
func ObjectKey(prefix, snapshot string) string {
	if strings.HasSuffix(prefix, ".db") {
		return prefix
	}
	if prefix == "" {
		return SnapshotFileName(snapshot)
	}
	return strings.TrimSuffix(prefix, "/") + "/" + SnapshotFileName(snapshot)
}

// FilePath is the path, relative to the volume's root, of snapshot under the destination's
// subPath (a directory).
func FilePath(subPath, snapshot string) string {
	if strings.HasSuffix(subPath, ".db") {
		return subPath
	}
	return path.Join(subPath, SnapshotFileName(snapshot))
}

// FileLocation narrows a destination to snapshot's own file: its exact S3 key (ObjectKey)
// or its exact path in the volume (FilePath), the rest of the destination kept.
func FileLocation(loc etcdv1.SnapshotLocation, snapshot string) etcdv1.SnapshotLocation {
	out := *loc.DeepCopy()
	switch {
	case out.S3 != nil:
		out.S3.Key = ObjectKey(out.S3.Key, snapshot)
	case out.PVC != nil:
		out.PVC.SubPath = FilePath(out.PVC.SubPath, snapshot)
	}
	return out
}

// DestinationURI is where snapshot is stored for a destination: s3://bucket/key or
// pvc://claim/path.
func DestinationURI(loc etcdv1.SnapshotLocation, snapshot string) string {
	switch {
	case loc.S3 != nil:
		return "s3://" + loc.S3.Bucket + "/" + ObjectKey(loc.S3.Key, snapshot)
	case loc.PVC != nil:
		return "pvc://" + loc.PVC.ClaimName + "/" + FilePath(loc.PVC.SubPath, snapshot)
	}
	return ""
}
