package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// invalidCreate is an object the apiserver must refuse, and the words its answer must hold.
type invalidCreate struct {
	name string
	obj  client.Object
	want string
}

func invalidCreates() []invalidCreate {
	memory := etcdv1.StorageMediumMemory
	return []invalidCreate{
		// metadata.name: every derived name must be valid
		{"name longer than 56", newCluster(strings.Repeat("n", 57)), "metadata.name must be a DNS label of at most 56 characters that starts with a letter"},
		{"name with a dot", newCluster("db.orders"), "metadata.name must be a DNS label of at most 56 characters"},
		{"name starting with a digit", newCluster("1db"), "metadata.name must be a DNS label of at most 56 characters that starts with a letter"},
		// spec.version
		{"version with two v", newCluster("v01", withVersion("vv3.6.16")), "spec.version must be an etcd release X.Y.Z, with or without a leading 'v', for example 3.6.16 or v3.5.21"},
		{"version without patch", newCluster("v02", withVersion("3.6")), "spec.version must be an etcd release X.Y.Z"},
		{"version empty", newCluster("v03", withVersion("")), "spec.version must be an etcd release X.Y.Z"},
		{"version 3.4", newCluster("v04", withVersion("3.4.30")), "spec.version must be etcd 3.5.0 or newer"},
		{"version 2.x", newCluster("v05", withVersion("2.3.8")), "spec.version must be etcd 3.5.0 or newer"},
		{"version v3.4 with its v", newCluster("v07", withVersion("v3.4.30")), "spec.version must be etcd 3.5.0 or newer in the 3.x line, for example 3.5.21, 3.6.16 or 3.7.3: the operator does not run older releases; upgrade an older cluster to 3.5 before handing it to the operator"},
		{"version 4.x", newCluster("v08", withVersion("4.0.0")), "spec.version must be etcd 3.5.0 or newer"},
		{"version with suffix", newCluster("v06", withVersion("3.6.0-rc.1")), "spec.version must be an etcd release X.Y.Z"},
		// spec.replicas, spec.progressDeadlineSeconds
		{"negative replicas", newCluster("r01", withReplicas(-1)), "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"},
		{"zero progress deadline", newCluster("r03", func(c *etcdv1.EtcdCluster) { c.Spec.ProgressDeadlineSeconds = ptr[int32](0) }), "spec.progressDeadlineSeconds in body should be greater than or equal to 1"},
		// spec.storage
		{"unknown medium", newCluster("s01", withStorage("1Gi", "Disk")), `spec.storage.medium: Unsupported value: "Disk"`},
		{"memory paused", newCluster("s02", withStorage("1Gi", memory), withReplicas(0)), "spec.replicas: 0 pauses the cluster, which would discard the data of spec.storage.medium Memory"},
		{"memory without size", newCluster("s03", withStorage("0", memory)), "spec.storage.size must be greater than 0: it is each member's PVC size, or its tmpfs size limit"},
		{"zero size on PVC", newCluster("s04", withStorage("0", "")), "spec.storage.size must be greater than 0"},
		{"tmpfs below two log segments", newCluster("s05", withStorage("64Mi", memory)), "spec.storage.size must be at least 256Mi: etcd writes its log in 61 MiB segments"},
		{"PVC below two log segments", newCluster("s06", withStorage("255Mi", "")), "spec.storage.size must be at least 256Mi"},
		// spec.tls
		{"client TLS with two sources", newCluster("t01", withClientTLS(etcdv1.ClientTLS{ServerSecretRef: ref("srv"), CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: issuer("ca")}})), "spec.tls.client needs exactly one source"},
		{"client TLS with no source", newCluster("t02", withClientTLS(etcdv1.ClientTLS{})), "spec.tls.client needs exactly one source"},
		{"client TLS operator secret with cert-manager", newCluster("t03", withClientTLS(etcdv1.ClientTLS{OperatorClientSecretRef: ref("op"), CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: issuer("ca")}})), "operatorClientSecretRef cannot be combined with certManager: use certManager.operatorClientIssuerRef"},
		{"peer TLS with two sources", newCluster("t04", withPeerTLS(etcdv1.PeerTLS{SecretRef: ref("peer"), CertManager: &etcdv1.PeerCertManager{IssuerRef: issuer("ca")}})), "spec.tls.peer needs exactly one source"},
		{"peer TLS with no source", newCluster("t05", withPeerTLS(etcdv1.PeerTLS{})), "spec.tls.peer needs exactly one source"},
		{"peer auto TLS with a Secret", newCluster("t08", withPeerTLS(etcdv1.PeerTLS{SecretRef: ref("peer"), AutoTLS: true})), "spec.tls.peer needs exactly one source"},
		{"issuer of unknown kind", newCluster("t06", withClientTLS(etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: etcdv1.IssuerReference{Name: "ca", Kind: "Vault"}}})), `spec.tls.client.certManager.serverIssuerRef.kind: Unsupported value: "Vault"`},
		{"issuer without name", newCluster("t07", withPeerTLS(etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: issuer("")}})), "spec.tls.peer.certManager.issuerRef.name in body should be at least 1 chars long"},
		// spec.tls.validityDuration, spec.tls.renewBefore
		{"lifetime in days", newCluster("t09", withIssuedClientTLS("ca"), withLifetime("365d", "")), "spec.tls.validityDuration must be a duration in hours, minutes or seconds"},
		{"lifetime below cert-manager's hour", newCluster("t10", withIssuedClientTLS("ca"), withLifetime("59m", "")), "spec.tls.validityDuration must be at least 1h"},
		{"renewBefore that is no duration", newCluster("t11", withIssuedClientTLS("ca"), withLifetime("", "a month")), "spec.tls.renewBefore must be a duration in hours, minutes or seconds"},
		{"renewBefore below cert-manager's 5m", newCluster("t12", withIssuedClientTLS("ca"), withLifetime("", "4m59s")), "spec.tls.renewBefore must be at least 5m"},
		{"renewBefore as long as the lifetime", newCluster("t13", withIssuedClientTLS("ca"), withLifetime("8760h", "8760h")), "spec.tls.renewBefore must be shorter than spec.tls.validityDuration (2160h when unset)"},
		{"renewBefore beyond the default lifetime", newCluster("t14", withIssuedClientTLS("ca"), withLifetime("", "2160h")), "spec.tls.renewBefore must be shorter than spec.tls.validityDuration"},
		{"lifetime for the user's own Secrets", newCluster("t15", withClientTLS(etcdv1.ClientTLS{ServerSecretRef: ref("srv")}), withLifetime("8760h", "")), "spec.tls.validityDuration and spec.tls.renewBefore apply only to certificates cert-manager issues"},
		// spec.auth
		{"auth without client TLS", newCluster("a01", withAuth(etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: ref("root")})), "spec.auth.enabled requires spec.tls.client"},
		{"auth with peer TLS only", newCluster("a02", withPeerTLS(etcdv1.PeerTLS{SecretRef: ref("peer")}), withAuth(etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: ref("root")})), "spec.auth.enabled requires spec.tls.client"},
		{"auth without credentials", newCluster("a03", withIssuedClientTLS("ca"), withAuth(etcdv1.AuthSpec{Enabled: true})), "spec.auth.enabled requires spec.auth.rootCredentialsSecretRef"},
		// spec.bootstrap.restore
		{"restore from an S3 prefix", newCluster("b01", withRestore(etcdv1.RestoreSource{S3: s3("backups/")})), "spec.bootstrap.restore.source.s3.key must be the exact key of the snapshot object"},
		{"restore from S3 without key", newCluster("b02", withRestore(etcdv1.RestoreSource{S3: s3("")})), "spec.bootstrap.restore.source.s3.key must be the exact key"},
		{"restore from PVC without file", newCluster("b03", withRestore(etcdv1.RestoreSource{PVC: pvc("")})), "spec.bootstrap.restore.source.pvc.subPath must be the exact path of the snapshot file"},
		{"restore from a PVC directory", newCluster("b04", withRestore(etcdv1.RestoreSource{PVC: pvc("snapshots/")})), "spec.bootstrap.restore.source.pvc.subPath must be the exact path"},
		{"restore from two sources", newCluster("b05", withRestore(etcdv1.RestoreSource{S3: s3("a.db"), PVC: pvc("a.db")})), "spec.bootstrap.restore.source needs exactly one of s3, pvc, snapshotRef or scheduleRef"},
		{"restore from no source", newCluster("b06", withRestore(etcdv1.RestoreSource{})), "spec.bootstrap.restore.source needs exactly one of s3, pvc, snapshotRef or scheduleRef"},
		{"restore from S3 and a snapshot", newCluster("b11", withRestore(etcdv1.RestoreSource{S3: s3("a.db"), SnapshotRef: ref("nightly")})), "spec.bootstrap.restore.source needs exactly one of s3, pvc, snapshotRef or scheduleRef"},
		{"restore from a PVC and a snapshot", newCluster("b12", withRestore(etcdv1.RestoreSource{PVC: pvc("a.db"), SnapshotRef: ref("nightly")})), "spec.bootstrap.restore.source needs exactly one of s3, pvc, snapshotRef or scheduleRef"},
		{"restore from an unnamed snapshot", newCluster("b13", withRestore(etcdv1.RestoreSource{SnapshotRef: ref("")})), "spec.bootstrap.restore.source.snapshotRef.name must name an EtcdSnapshot"},
		{"restore from a schedule and a snapshot", newCluster("b14", withTarget(etcdv1.RestoreSource{ScheduleRef: ref("nightly"), SnapshotRef: ref("nightly")}, etcdv1.RestoreTarget{Revision: ptr[int64](5)})), "spec.bootstrap.restore.source needs exactly one of s3, pvc, snapshotRef or scheduleRef"},
		{"restore from an unnamed schedule", newCluster("b15", withTarget(etcdv1.RestoreSource{ScheduleRef: ref("")}, etcdv1.RestoreTarget{Revision: ptr[int64](5)})), "spec.bootstrap.restore.source.scheduleRef.name must name an EtcdSnapshotSchedule"},
		{"restore to a revision and a time", newCluster("b16", withTarget(etcdv1.RestoreSource{ScheduleRef: ref("nightly")}, etcdv1.RestoreTarget{Revision: ptr[int64](5), Time: &metav1.Time{Time: time.Unix(1_800_000_000, 0)}})), "spec.bootstrap.restore.target needs exactly one of revision or time"},
		{"restore to no point", newCluster("b17", withTarget(etcdv1.RestoreSource{ScheduleRef: ref("nightly")}, etcdv1.RestoreTarget{})), "spec.bootstrap.restore.target needs exactly one of revision or time"},
		{"restore a snapshot to a target", newCluster("b18", withTarget(etcdv1.RestoreSource{SnapshotRef: ref("nightly")}, etcdv1.RestoreTarget{Revision: ptr[int64](5)})), "spec.bootstrap.restore.target and spec.bootstrap.restore.source.scheduleRef go together"},
		{"restore a schedule without a target", newCluster("b19", withRestore(etcdv1.RestoreSource{ScheduleRef: ref("nightly")})), "spec.bootstrap.restore.target and spec.bootstrap.restore.source.scheduleRef go together"},
		{"restore onto tmpfs", newCluster("b07", withStorage("1Gi", memory), withRestore(etcdv1.RestoreSource{S3: s3("a.db")})), "spec.bootstrap.restore needs persistent storage"},
		{"restore from a host without scheme", newCluster("b08", withRestore(etcdv1.RestoreSource{S3: func() *etcdv1.S3SnapshotLocation { l := s3("a.db"); l.Endpoint = "minio:9000"; return l }()})), "endpoint must be a URL starting with http:// or https://"},
		{"restore from a bad bucket name", newCluster("b09", withRestore(etcdv1.RestoreSource{S3: func() *etcdv1.S3SnapshotLocation { l := s3("a.db"); l.Bucket = "My_Backups"; return l }()})), "bucket must be a valid S3 bucket name"},
		{"restore from outside the volume", newCluster("b10", withRestore(etcdv1.RestoreSource{PVC: pvc("../other/a.db")})), "subPath must be a relative path inside the volume without '..'"},
		// spec.quorumLoss
		{"quorum-loss policy unknown", newCluster("q01", func(c *etcdv1.EtcdCluster) { c.Spec.QuorumLoss = &etcdv1.QuorumLossPolicy{Policy: "Always"} }), `spec.quorumLoss.policy: Unsupported value: "Always"`},
		{"quorum-loss grace period with Manual", newCluster("q02", func(c *etcdv1.EtcdCluster) {
			c.Spec.QuorumLoss = &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossManual, GracePeriodSeconds: ptr[int32](60)}
		}), "spec.quorumLoss.gracePeriodSeconds applies only to policy RecoverFromMostAdvancedMember"},
		{"quorum-loss grace period of 5 s", newCluster("q03", func(c *etcdv1.EtcdCluster) {
			c.Spec.QuorumLoss = &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember, GracePeriodSeconds: ptr[int32](5)}
		}), "spec.quorumLoss.gracePeriodSeconds in body should be greater than or equal to 10"},
		{"automatic recovery on tmpfs", newCluster("q04", withStorage("1Gi", memory), func(c *etcdv1.EtcdCluster) {
			c.Spec.QuorumLoss = &etcdv1.QuorumLossPolicy{Policy: etcdv1.QuorumLossRecoverFromMostAdvancedMember}
		}), "spec.quorumLoss.policy RecoverFromMostAdvancedMember needs persistent storage"},
		// spec.nodeLoss
		{"node-loss policy unknown", newCluster("n01", func(c *etcdv1.EtcdCluster) { c.Spec.NodeLoss = &etcdv1.NodeLossPolicy{Policy: "Never"} }), `spec.nodeLoss.policy: Unsupported value: "Never"`},
		{"node-loss grace period with Manual", newCluster("n02", func(c *etcdv1.EtcdCluster) {
			c.Spec.NodeLoss = &etcdv1.NodeLossPolicy{Policy: etcdv1.NodeLossManual, GracePeriodSeconds: ptr[int32](60)}
		}), "spec.nodeLoss.gracePeriodSeconds applies only to policy ReplaceMember"},
		{"node-loss grace period of 0 s", newCluster("n03", func(c *etcdv1.EtcdCluster) {
			c.Spec.NodeLoss = &etcdv1.NodeLossPolicy{GracePeriodSeconds: ptr[int32](0)}
		}), "spec.nodeLoss.gracePeriodSeconds in body should be greater than or equal to 10"},
		// spec.tolerations, spec.priorityClassName
		{"33 tolerations", newCluster("p01", func(c *etcdv1.EtcdCluster) { c.Spec.Tolerations = make([]corev1.Toleration, 33) }), "spec.tolerations: Too many: 33: must have at most 32 items"},
		{"priority class name too long", newCluster("p02", func(c *etcdv1.EtcdCluster) { c.Spec.PriorityClassName = strings.Repeat("p", 254) }), "spec.priorityClassName: Too long: may not be more than 253"},
		// spec.options
		{"unknown compaction mode", newCluster("o01", withOptions(etcdv1.EtcdOptions{AutoCompactionMode: "hourly"})), `spec.options.autoCompactionMode: Unsupported value: "hourly"`},
		{"retention without mode as words", newCluster("o02", withOptions(etcdv1.EtcdOptions{AutoCompactionRetention: "a day"})), "must be a duration such as \"24h\""},
		{"revision retention as duration", newCluster("o03", withOptions(etcdv1.EtcdOptions{AutoCompactionMode: etcdv1.AutoCompactionRevision, AutoCompactionRetention: "24h"})), "must be a number of revisions"},
		{"periodic retention as words", newCluster("o04", withOptions(etcdv1.EtcdOptions{AutoCompactionMode: etcdv1.AutoCompactionPeriodic, AutoCompactionRetention: "one day"})), "must be a duration such as \"24h\""},
		{"negative quota", newCluster("o05", withOptions(etcdv1.EtcdOptions{QuotaBackendBytes: qtyPtr("-1")})), "spec.options.quotaBackendBytes must be between 0 (etcd's default, 2Gi) and 100Gi"},
		{"quota too large", newCluster("o06", withOptions(etcdv1.EtcdOptions{QuotaBackendBytes: qtyPtr("200Gi")})), "spec.options.quotaBackendBytes must be between 0 (etcd's default, 2Gi) and 100Gi"},
		{"sub-millisecond retention", newCluster("o08", withOptions(etcdv1.EtcdOptions{AutoCompactionMode: etcdv1.AutoCompactionPeriodic, AutoCompactionRetention: "1.5x"})), "must be a duration such as \"24h\", \"1.5h\""},
		{"zero snapshot count", newCluster("o07", withOptions(etcdv1.EtcdOptions{SnapshotCount: ptr[int64](0)})), "spec.options.snapshotCount in body should be greater than or equal to 1"},
		// EtcdSnapshot
		{"snapshot to no destination", newSnapshot("sn01", func(s *etcdv1.EtcdSnapshot) { s.Spec.Destination = etcdv1.SnapshotLocation{} }), "exactly one of s3 or pvc must be set"},
		{"snapshot to two destinations", newSnapshot("sn02", func(s *etcdv1.EtcdSnapshot) { s.Spec.Destination.PVC = pvc("") }), "exactly one of s3 or pvc must be set"},
		{"snapshot of no cluster", newSnapshot("sn03", func(s *etcdv1.EtcdSnapshot) { s.Spec.ClusterRef.Name = "" }), "spec.clusterRef.name must name the EtcdCluster to snapshot"},
		{"snapshot to a claim without name", newSnapshot("sn04", func(s *etcdv1.EtcdSnapshot) {
			s.Spec.Destination = etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{}}
		}), "spec.destination.pvc.claimName in body should be at least 1 chars long"},
		{"snapshot to an absolute path", newSnapshot("sn05", func(s *etcdv1.EtcdSnapshot) { s.Spec.Destination = etcdv1.SnapshotLocation{PVC: pvc("/var/backups")} }), "subPath must be a relative path inside the volume"},
		{"snapshot to an empty bucket name", newSnapshot("sn06", func(s *etcdv1.EtcdSnapshot) { s.Spec.Destination.S3.Bucket = "" }), "spec.destination.s3.bucket in body should be at least 3 chars long"},
		{"snapshot with an unknown deletion policy", newSnapshot("sn07", func(s *etcdv1.EtcdSnapshot) { s.Spec.DeletionPolicy = "Purge" }), `spec.deletionPolicy: Unsupported value: "Purge"`},
		{"snapshot with a 10 s deadline", newSnapshot("sn08", func(s *etcdv1.EtcdSnapshot) { s.Spec.ActiveDeadlineSeconds = ptr[int64](10) }), "spec.activeDeadlineSeconds in body should be greater than or equal to 30"},
		{"snapshot as an invalid ServiceAccount", newSnapshot("sn09", func(s *etcdv1.EtcdSnapshot) { s.Spec.Destination.S3.ServiceAccountName = "Etcd_Backup" }), "serviceAccountName must be the name of a ServiceAccount"},
		// EtcdSnapshotSchedule
		{"schedule with six cron fields", newSchedule("sc01", func(s *etcdv1.EtcdSnapshotSchedule) { s.Spec.Schedule = "0 0 3 * * *" }), "spec.schedule must be a 5-field cron expression"},
		{"schedule with four cron fields", newSchedule("sc02", func(s *etcdv1.EtcdSnapshotSchedule) { s.Spec.Schedule = "0 3 * *  " }), "spec.schedule must be a 5-field cron expression"},
		{"schedule of no cluster", newSchedule("sc03", func(s *etcdv1.EtcdSnapshotSchedule) { s.Spec.ClusterRef.Name = "" }), "spec.clusterRef.name must name the EtcdCluster to snapshot"},
		{"schedule to one fixed key", newSchedule("sc04", func(s *etcdv1.EtcdSnapshotSchedule) { s.Spec.Destination.S3.Key = "nightly/etcd.db" }), "spec.destination.s3.key of a schedule is a key prefix"},
		{"schedule to no destination", newSchedule("sc05", func(s *etcdv1.EtcdSnapshotSchedule) { s.Spec.Destination = etcdv1.SnapshotLocation{} }), "exactly one of s3 or pvc must be set"},
		{"schedule keeping none", newSchedule("sc06", func(s *etcdv1.EtcdSnapshotSchedule) { s.Spec.Retention.KeepLast = ptr[int32](0) }), "spec.retention.keepLast in body should be greater than or equal to 1"},
		{"archive closing segments too often", newSchedule("sc08", withArchive("500ms", "8Mi")), "spec.archive.segmentInterval must be between 1s and 10m"},
		{"archive closing segments too rarely", newSchedule("sc09", withArchive("1h", "8Mi")), "spec.archive.segmentInterval must be between 1s and 10m"},
		{"archive segments too small", newSchedule("sc10", withArchive("5s", "1Ki")), "spec.archive.segmentMaxBytes must be more than 64Ki and less than 1Gi"},
		{"archive segments too large", newSchedule("sc11", withArchive("5s", "2Gi")), "spec.archive.segmentMaxBytes must be more than 64Ki and less than 1Gi"},
		{"schedule with an unknown deletion policy", newSchedule("sc07", func(s *etcdv1.EtcdSnapshotSchedule) { s.Spec.DeletionPolicy = "Keep" }), `spec.deletionPolicy: Unsupported value: "Keep"`},
		// EtcdDefrag
		{"defrag all and a threshold", newDefrag("d01", withRule(etcdv1.DefragRule{All: true, FreeSpaceAbove: qtyPtr("1Mi")})), "rule.all defragments every member and cannot be combined with freeSpaceAbove, quotaUsageAbove or minReclaim"},
		{"defrag above 0 bytes free", newDefrag("d02", withRule(etcdv1.DefragRule{FreeSpaceAbove: qtyPtr("0")})), "rule.freeSpaceAbove must be greater than 0"},
		{"defrag minReclaim alone", newDefrag("d03", withRule(etcdv1.DefragRule{MinReclaim: qtyPtr("32Mi")})), "rule.minReclaim applies only with rule.quotaUsageAbove"},
		{"defrag quota usage without %", newDefrag("d04", withRule(etcdv1.DefragRule{QuotaUsageAbove: "80"})), "spec.rule.quotaUsageAbove in body should match"},
		{"defrag minReclaim above freeSpaceAbove", newDefrag("d05", withRule(etcdv1.DefragRule{QuotaUsageAbove: "80%", MinReclaim: qtyPtr("300Mi"), FreeSpaceAbove: qtyPtr("200Mi")})), "rule.minReclaim must not be larger than rule.freeSpaceAbove"},
		{"defrag reclaiming 0 bytes", newDefrag("d07", withRule(etcdv1.DefragRule{QuotaUsageAbove: "80%", MinReclaim: qtyPtr("0")})), "rule.minReclaim must be greater than 0, for example 32Mi"},
		{"defrag negative TTL", newDefrag("d06", func(d *etcdv1.EtcdDefrag) { d.Spec.TTLSecondsAfterFinished = ptr[int32](-1) }), "spec.ttlSecondsAfterFinished in body should be greater than or equal to 0"},
		{"defrag schedule empty", newCluster("d07", func(c *etcdv1.EtcdCluster) { c.Spec.Defrag = &etcdv1.DefragSchedule{} }), "spec.defrag.schedule in body should be at least 1 chars long"},
		{"NOSPACE policy unknown", newCluster("d08", func(c *etcdv1.EtcdCluster) { c.Spec.Alarms = &etcdv1.AlarmPolicy{NoSpace: "Never"} }), "spec.alarms.noSpace: Unsupported value: \"Never\""},
		{"defrag of no cluster", newDefrag("d06", func(d *etcdv1.EtcdDefrag) { d.Spec.ClusterRef.Name = "" }), "spec.clusterRef.name must name the EtcdCluster to defragment"},
		// EtcdDefragPolicy
		{"defrag policy of no cluster", newDefragPolicy("dp01", func(p *etcdv1.EtcdDefragPolicy) { p.Spec.ClusterRef.Name = "" }), "spec.clusterRef.name must name the EtcdCluster to defragment"},
		{"defrag policy without schedule", newDefragPolicy("dp02", func(p *etcdv1.EtcdDefragPolicy) { p.Spec.Schedule = "" }), "spec.schedule in body should be at least 1 chars long"},
		{"defrag policy with six cron fields", newDefragPolicy("dp03", func(p *etcdv1.EtcdDefragPolicy) { p.Spec.Schedule = "0 0 3 * * *" }), "spec.schedule must be a 5-field cron expression (minute hour day-of-month month day-of-week), for example \"0 3 * * *\", or @daily, @hourly, @every 6h"},
		{"defrag policy with four cron fields after a zone", newDefragPolicy("dp04", func(p *etcdv1.EtcdDefragPolicy) { p.Spec.Schedule = "CRON_TZ=Europe/Berlin 0 3 * *" }), "or @daily, @hourly, @every 6h"},
		{"defrag policy concurrency Replace", newDefragPolicy("dp05", func(p *etcdv1.EtcdDefragPolicy) { p.Spec.ConcurrencyPolicy = "Replace" }), `spec.concurrencyPolicy: Unsupported value: "Replace"`},
		{"defrag policy negative deadline", newDefragPolicy("dp06", func(p *etcdv1.EtcdDefragPolicy) { p.Spec.StartingDeadlineSeconds = ptr[int64](-1) }), "spec.startingDeadlineSeconds in body should be greater than or equal to 0"},
		{"defrag policy negative history", newDefragPolicy("dp07", func(p *etcdv1.EtcdDefragPolicy) { p.Spec.HistoryLimit = ptr[int32](-1) }), "spec.historyLimit in body should be greater than or equal to 0"},
		{"defrag policy negative TTL", newDefragPolicy("dp08", func(p *etcdv1.EtcdDefragPolicy) { p.Spec.TTLSecondsAfterFinished = ptr[int32](-1) }), "spec.ttlSecondsAfterFinished in body should be greater than or equal to 0"},
		{"defrag policy rule all and a threshold", newDefragPolicy("dp09", func(p *etcdv1.EtcdDefragPolicy) {
			p.Spec.Rule = &etcdv1.DefragRule{All: true, QuotaUsageAbove: "80%"}
		}), "rule.all defragments every member and cannot be combined with freeSpaceAbove, quotaUsageAbove or minReclaim"},
		{"defrag policy minReclaim alone", newDefragPolicy("dp10", func(p *etcdv1.EtcdDefragPolicy) { p.Spec.Rule = &etcdv1.DefragRule{MinReclaim: qtyPtr("32Mi")} }), "rule.minReclaim applies only with rule.quotaUsageAbove"},
		// EtcdMember
		{"member with a tag for version", newMember("m01", func(m *etcdv1.EtcdMember) { m.Spec.Version = "latest" }), "spec.version must be an etcd release X.Y.Z"},
		{"member with unknown cluster state", newMember("m02", func(m *etcdv1.EtcdMember) { m.Spec.Bootstrap.InitialClusterState = "join" }), `spec.bootstrap.initialClusterState: Unsupported value: "join"`},
		{"member of no cluster", newMember("m03", func(m *etcdv1.EtcdMember) { m.Spec.ClusterName = "" }), "spec.clusterName in body should be at least 1 chars long"},
		{"adopted member with its data outside its volume", newMember("m04", adoptedAt("/var/lib/etcd/../../etc")), "spec.adopted.dataDir must be /var/lib/etcd or a directory under it"},
		{"adopted member with its data in another mount", newMember("m05", adoptedAt("/data")), "spec.adopted.dataDir must be /var/lib/etcd or a directory under it"},
		{"member adopted from an unknown operator", newMember("m06", func(m *etcdv1.EtcdMember) {
			adoptedAt("/var/lib/etcd")(m)
			m.Spec.Adopted.From = "elsewhere"
		}), `spec.adopted.from: Unsupported value: "elsewhere"`},
	}
}

func TestInvalidCreatesAreRejectedWithTheirReason(t *testing.T) {
	for _, tc := range invalidCreates() {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(t.Context(), tc.obj)
			requireInvalid(t, err, tc.want)
			requireAbsent(t, tc.obj)
		})
	}
}

// invalidUpdate is a valid object and a change to it the apiserver must refuse.
type invalidUpdate struct {
	name   string
	obj    client.Object
	change func(client.Object)
	want   string
}

func onCluster(edits ...clusterEdit) func(client.Object) {
	return func(o client.Object) {
		for _, edit := range edits {
			edit(o.(*etcdv1.EtcdCluster))
		}
	}
}

func invalidUpdates() []invalidUpdate {
	memory := etcdv1.StorageMediumMemory
	return []invalidUpdate{
		{"shrink storage", newCluster("u01", withStorage("2Gi", "")), onCluster(withStorage("1Gi", "")), "spec.storage.size cannot shrink"},
		{"move to tmpfs", newCluster("u03"), onCluster(withStorage("1Gi", memory)), "spec.storage.medium is immutable"},
		{"move off tmpfs", newCluster("u04", withStorage("1Gi", memory)), onCluster(withStorage("1Gi", "")), "spec.storage.medium is immutable"},
		{"set a storage class", newCluster("u05"), onCluster(withStorageClass("fast")), "spec.storage.storageClassName is immutable"},
		{"change the storage class", newCluster("u06", withStorageClass("fast")), onCluster(withStorageClass("slow")), "spec.storage.storageClassName is immutable"},
		{"pause a tmpfs cluster", newCluster("u07", withStorage("1Gi", memory)), onCluster(withReplicas(0)), "spec.replicas: 0 pauses the cluster"},
		{"add TLS", newCluster("u08"), onCluster(withIssuedClientTLS("ca")), "spec.tls cannot be added, removed or changed on an existing cluster yet"},
		{"remove TLS", newCluster("u09", withIssuedClientTLS("ca")), onCluster(func(c *etcdv1.EtcdCluster) { c.Spec.TLS = nil }), "spec.tls cannot be added, removed or changed"},
		{"switch from cert-manager to own Secrets", newCluster("u10", withIssuedClientTLS("ca")), onCluster(withClientTLS(etcdv1.ClientTLS{ServerSecretRef: ref("server")})), "spec.tls cannot be added, removed or changed"},
		{"turn on mutual TLS with a client issuer", newCluster("u10b", withIssuedClientTLS("ca")), onCluster(withClientTLS(etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: issuer("ca"), OperatorClientIssuerRef: ptr(issuer("clients"))}})), "spec.tls cannot be added, removed or changed"},
		{"switch the peer issuer to own Secrets", newCluster("u10c", withIssuedClientTLS("ca"), withPeerTLS(etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: issuer("ca")}})), onCluster(withPeerTLS(etcdv1.PeerTLS{SecretRef: ref("peer")})), "spec.tls cannot be added, removed or changed"},
		{"add peer TLS", newCluster("u11", withIssuedClientTLS("ca")), onCluster(withPeerTLS(etcdv1.PeerTLS{SecretRef: ref("peer")})), "spec.tls cannot be added, removed or changed"},
		{"turn on auth", newCluster("u12", withIssuedClientTLS("ca")), onCluster(withAuth(etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: ref("root")})), "spec.auth cannot be added, removed or changed on an existing cluster yet"},
		{"point auth at another Secret", newCluster("u13", withIssuedClientTLS("ca"), withAuth(etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: ref("root")})), onCluster(withAuth(etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: ref("root2")})), "edit the Secret that spec.auth.rootCredentialsSecretRef names"},
		{"add a restore source later", newCluster("u14"), onCluster(withRestore(etcdv1.RestoreSource{S3: s3("a.db")})), "spec.bootstrap is immutable"},
		{"change the restore source", newCluster("u15", withRestore(etcdv1.RestoreSource{S3: s3("a.db")})), onCluster(withRestore(etcdv1.RestoreSource{S3: s3("b.db")})), "spec.bootstrap is immutable"},
		{"change the restore snapshot", newCluster("u15b", withRestore(etcdv1.RestoreSource{SnapshotRef: ref("a")})), onCluster(withRestore(etcdv1.RestoreSource{SnapshotRef: ref("b")})), "spec.bootstrap is immutable"},
		{"skip a minor", newCluster("u22", withVersion("3.5.35")), onCluster(withVersion("3.7.0")), "spec.version cannot jump from 3.5.35 to 3.7.0: etcd upgrades one minor version at a time; set the newest patch of the next minor first, wait until status.version shows it, then set 3.7.0"},
		{"skip a minor written with v", newCluster("u23", withVersion("v3.5.21")), onCluster(withVersion("v3.7.3")), "spec.version cannot jump from v3.5.21 to v3.7.3"},
		{"retarget a snapshot", newSnapshot("u17"), func(o client.Object) { o.(*etcdv1.EtcdSnapshot).Spec.ClusterRef.Name = "other" }, "spec.clusterRef and spec.destination of an EtcdSnapshot are immutable"},
		{"move a snapshot's destination", newSnapshot("u21"), func(o client.Object) { o.(*etcdv1.EtcdSnapshot).Spec.Destination.S3.Key = "elsewhere/" }, "spec.clusterRef and spec.destination of an EtcdSnapshot are immutable"},
		{"change the defrag rule", newDefrag("u18"), func(o client.Object) {
			o.(*etcdv1.EtcdDefrag).Spec.Rule = &etcdv1.DefragRule{All: true}
		}, "spec of an EtcdDefrag is immutable"},
		{"move a member to another cluster", newMember("u19"), func(o client.Object) { o.(*etcdv1.EtcdMember).Spec.ClusterName = "other" }, "spec.clusterName is immutable"},
		{"move a member to tmpfs", newMember("u20"), func(o client.Object) { o.(*etcdv1.EtcdMember).Spec.Storage.Medium = memory }, "spec.storage.medium is immutable"},
		{"move an adopted member's data", newMember("u21", adoptedAt("/var/lib/etcd")), func(o client.Object) { adoptedAt("/var/lib/etcd/data")(o.(*etcdv1.EtcdMember)) }, "spec.adopted is immutable"},
	}
}

func TestInvalidUpdatesAreRejectedAndNothingIsApplied(t *testing.T) {
	for _, tc := range invalidUpdates() {
		t.Run(tc.name, func(t *testing.T) {
			requireCreate(t, tc.obj)
			stored := tc.obj.DeepCopyObject().(client.Object)
			tc.change(tc.obj)
			err := k8s.Update(t.Context(), tc.obj)
			requireInvalid(t, err, tc.want)
			requireUnchanged(t, stored)
		})
	}
}

func requireCreate(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(t.Context(), obj); err != nil {
		t.Fatalf("creating a valid %T %s: %v", obj, obj.GetName(), err)
	}
}

func requireInvalid(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want rejection with %q", want)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("rejected as %v, want Invalid (422): %v", apierrors.ReasonForError(err), err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("rejection does not say %q:\n%v", want, err)
	}
}

func requireAbsent(t *testing.T, obj client.Object) {
	t.Helper()
	probe := obj.DeepCopyObject().(client.Object)
	err := k8s.Get(t.Context(), client.ObjectKeyFromObject(obj), probe)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("a rejected %T %s exists after all (get: %v)", obj, obj.GetName(), err)
	}
}

// requireUnchanged checks that the stored object is still the one created before the refused
// update: same resourceVersion, so not even metadata was written.
func requireUnchanged(t *testing.T, created client.Object) {
	t.Helper()
	now := created.DeepCopyObject().(client.Object)
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(created), now); err != nil {
		t.Fatalf("reading back %s: %v", created.GetName(), err)
	}
	if now.GetResourceVersion() != created.GetResourceVersion() {
		t.Fatalf("%s was written by a refused update: resourceVersion %s -> %s",
			created.GetName(), created.GetResourceVersion(), now.GetResourceVersion())
	}
}

// describe is used in failure messages of the valid-spec tests.
func describe(obj client.Object) string {
	return fmt.Sprintf("%T %s/%s", obj, obj.GetNamespace(), obj.GetName())
}

// adoptedAt marks a member as adopted from Cozystack's operator with its data at dataDir.
func adoptedAt(dataDir string) memberEdit {
	return func(m *etcdv1.EtcdMember) {
		m.Spec.Adopted = &etcdv1.MemberAdoption{From: etcdv1.AdoptedFromCozystack, PVCName: "data-" + m.Name, DataDir: dataDir}
	}
}

// spec.version goes down only to a version no member has run, as the status records what
// each member reports, or one whole minor (etcd's downgrade): a release set by mistake (no
// image, say) can be set back, an older patch of what ran or two minors at once cannot. The
// status is written first, as the operator writes it.
func TestVersionGoesDownOnlyToAVersionNoMemberRan(t *testing.T) {
	ran := func(versions ...string) []etcdv1.MemberSummary {
		out := make([]etcdv1.MemberSummary, len(versions))
		for i, v := range versions {
			out[i] = etcdv1.MemberSummary{Name: fmt.Sprintf("m%d", i), Version: v}
		}
		return out
	}
	for i, tc := range []struct {
		name     string
		from, to string
		members  []etcdv1.MemberSummary // status.members; nil: no status written yet
		lowest   string                 // status.version
		want     string                 // the refusal; "" when accepted
	}{
		{name: "a minor no member ran, set back", from: "3.6.16", to: "3.5.35", members: ran("3.5.35", "3.5.35", "3.5.35"), lowest: "3.5.35"},
		{name: "a member that does not answer yet counts for nothing", from: "3.6.99", to: "3.6.16", members: append(ran("3.6.16", "3.6.16"), etcdv1.MemberSummary{Name: "new"}), lowest: "3.6.16"},
		{name: "nothing ran yet (no status)", from: "3.6.16", to: "3.6.15"},
		{name: "a member ran the newer patch", from: "3.6.99", to: "3.6.16", members: ran("3.6.16", "3.6.99", "3.6.16"), lowest: "3.6.16",
			want: "spec.version cannot go down from 3.6.99 to 3.6.16: a member has run a newer version (status.members[].version), and etcd goes down a whole minor (3.6 to 3.5, 3.7 to 3.6), not to an older patch of what ran; set the newest version a member has run or a newer one, or create a new cluster at 3.6.16 and restore it from a snapshot"},
		{name: "below what every member runs", from: "3.6.16", to: "3.6.15", members: ran("3.6.16", "3.6.16", "3.6.16"), lowest: "3.6.16", want: "spec.version cannot go down from 3.6.16 to 3.6.15"},
		{name: "a minor down from a half-done upgrade", from: "3.6.16", to: "3.5.35", members: ran("3.5.35", "3.6.16", "3.5.35"), lowest: "3.5.35"},
		{name: "a minor down: etcd's downgrade", from: "3.6.16", to: "3.5.35", members: ran("3.6.16", "3.6.16", "3.6.16"), lowest: "3.6.16"},
		{name: "3.7 to 3.6", from: "3.7.3", to: "v3.6.16", members: ran("3.7.3", "3.7.3", "3.7.3"), lowest: "3.7.3"},
		{name: "another patch of the lower minor half-way down", from: "3.5.35", to: "3.5.30", members: ran("3.5.35", "3.6.16", "3.6.16"), lowest: "3.5.35"},
		{name: "two minors down", from: "3.7.3", to: "3.5.35", members: ran("3.7.3", "3.7.3", "3.7.3"), lowest: "3.7.3",
			want: "spec.version cannot go down from 3.7.3 to 3.5.35 at once: a member has run a release more than one minor above it (status.members[].version), and etcd downgrades one minor at a time; set a patch of the minor just below the one that runs, wait until status.version shows it, then set 3.5.35"},
		{name: "two minors down, one set back before", from: "3.6.16", to: "3.5.35", members: ran("3.7.3", "3.6.16", "3.7.3"), lowest: "3.6.16",
			want: "etcd downgrades one minor at a time"},
		{name: "a patch of the lower minor, no member on the higher one", from: "3.5.35", to: "3.5.30", members: ran("3.5.35", "3.5.35"), lowest: "3.5.35",
			want: "not to an older patch of what ran"},
		{name: "below the recorded cluster version, no member listed", from: "3.6.16", to: "3.6.15", lowest: "3.6.16", want: "spec.version cannot go down from 3.6.16 to 3.6.15"},
		{name: "written with v, below what every member runs", from: "v3.6.16", to: "v3.6.15", members: ran("3.6.16", "3.6.16", "3.6.16"), lowest: "3.6.16", want: "spec.version cannot go down from v3.6.16 to v3.6.15"},
		{name: "the same version, its v taken off", from: "v3.6.16", to: "3.6.16", members: ran("3.6.16", "3.6.16", "3.6.16"), lowest: "3.6.16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(fmt.Sprintf("ver-%d", i), withVersion(tc.from))
			requireCreate(t, c)
			if tc.members != nil || tc.lowest != "" {
				c.Status.Members, c.Status.Version = tc.members, tc.lowest
				if err := k8s.Status().Update(t.Context(), c); err != nil {
					t.Fatalf("writing status: %v", err)
				}
			}
			stored := c.DeepCopy()
			c.Spec.Version = tc.to
			err := k8s.Update(t.Context(), c)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			requireInvalid(t, err, tc.want)
			requireUnchanged(t, stored)
		})
	}
}

// The case: 3.6.16 -> 3.6.99 (a release with no image) is accepted, and so is going
// back, since no member reported running 3.6.99.
func TestAReleaseNoMemberRanIsSetBack(t *testing.T) {
	c := newCluster("ver-back")
	requireCreate(t, c)
	c.Status.Members = []etcdv1.MemberSummary{{Name: "a", Version: "3.6.16"}, {Name: "b", Version: "3.6.16"}, {Name: "c", Version: "3.6.16"}}
	c.Status.Version = "3.6.16"
	if err := k8s.Status().Update(t.Context(), c); err != nil {
		t.Fatalf("writing status: %v", err)
	}
	for _, v := range []string{"3.6.99", "3.6.16"} {
		c.Spec.Version = v
		if err := k8s.Update(t.Context(), c); err != nil {
			t.Fatalf("spec.version to %s refused: %v", v, err)
		}
	}
}
