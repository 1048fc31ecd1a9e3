package aenixfixture

import (
	"fmt"
	"strings"
)

// The legacy operator's backups, v0.4.x: EtcdBackup and EtcdBackupSchedule of the same group
// and version as its EtcdCluster.
const (
	BackupKind         = "EtcdBackup"
	BackupScheduleKind = "EtcdBackupSchedule"
)

// S3Destination is a legacy spec.destination.s3: key is a key prefix, the Secret holds
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
func S3Destination(endpoint, bucket, prefix, secret string) map[string]any {
	return map[string]any{"s3": map[string]any{"endpoint": endpoint, "bucket": bucket, "key": prefix,
		"credentialsSecretRef": map[string]any{"name": secret}, "region": "us-east-1", "forcePathStyle": true}}
}

// PVCDestination is a legacy spec.destination.pvc: subPath is a directory.
func PVCDestination(claim, subPath string) map[string]any {
	return map[string]any{"pvc": map[string]any{"claimName": claim, "subPath": subPath}}
}

// BackupKey is the S3 key the legacy backup agent writes an EtcdBackup's file to: the backup's
// name under the key prefix, with the etcd revision the agent read before the snapshot (it
// always adds it for an EtcdBackup).
func BackupKey(prefix, backup string, revision int64) string {
	file := fmt.Sprintf("%s-rev%d.db", backup, revision)
	if prefix == "" {
		return file
	}
	return strings.TrimRight(prefix, "/") + "/" + file
}

// BackupURI is status.snapshot.uri as the legacy operator records it for a destination.
func BackupURI(destination map[string]any, backup string, revision int64) string {
	if s3, ok := destination["s3"].(map[string]any); ok {
		return fmt.Sprintf("s3://%s/%s", s3["bucket"], BackupKey(s3["key"].(string), backup, revision))
	}
	pvc := destination["pvc"].(map[string]any)
	return "file://" + BackupKey("/backup/data/"+pvc["subPath"].(string), backup, revision)
}

// CompleteBackup is a legacy EtcdBackup of cluster as the legacy operator leaves it once its
// Job wrote the file: phase Complete, a Complete condition, status.snapshot with the file's
// URI, size and "sha256:<hex>" checksum.
func CompleteBackup(name, namespace, cluster string, destination map[string]any, revision, size int64, checksum string) map[string]any {
	return map[string]any{
		"apiVersion": APIVersion, "kind": BackupKind,
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"clusterRef": map[string]any{"name": cluster}, "destination": destination},
		"status": map[string]any{
			"phase": "Complete",
			"conditions": []any{map[string]any{"type": "Complete", "status": "True", "reason": "BackupComplete",
				"message": "backup completed", "lastTransitionTime": "2026-11-02T03:00:41Z"}},
			"snapshot": map[string]any{"uri": BackupURI(destination, name, revision), "sizeBytes": size, "checksum": checksum},
		},
	}
}

// BackupSchedule is a legacy EtcdBackupSchedule of cluster.
func BackupSchedule(name, namespace, cluster, schedule string, destination map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": APIVersion, "kind": BackupScheduleKind,
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{"clusterRef": map[string]any{"name": cluster}, "schedule": schedule, "destination": destination,
			"successfulJobsHistoryLimit": int64(3), "failedJobsHistoryLimit": int64(1)},
	}
}
