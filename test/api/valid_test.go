package api

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestMinimalClusterGetsItsDefaults(t *testing.T) {
	c := newCluster("defaults")
	requireCreate(t, c)

	got := &etcdv1.EtcdCluster{}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Replicas == nil || *got.Spec.Replicas != 3 {
		t.Errorf("replicas = %v, want default 3", got.Spec.Replicas)
	}
	if got.Spec.Storage.Size == nil || got.Spec.Storage.Size.String() != "1Gi" {
		t.Errorf("storage.size = %v, want default 1Gi", got.Spec.Storage.Size)
	}
	if got.Spec.Storage.Medium != etcdv1.StorageMediumDefault {
		t.Errorf("storage.medium = %q, want default \"\"", got.Spec.Storage.Medium)
	}
	if got.Spec.ProgressDeadlineSeconds == nil || *got.Spec.ProgressDeadlineSeconds != 600 {
		t.Errorf("progressDeadlineSeconds = %v, want default 600", got.Spec.ProgressDeadlineSeconds)
	}
	if p := got.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenDeleted != etcdv1.PVCRetain {
		t.Errorf("persistentVolumeClaimRetentionPolicy = %+v, want default whenDeleted Retain", p)
	}
}

func TestIssuerKindDefaultsToIssuer(t *testing.T) {
	c := newCluster("issuer-kind",
		withClientTLS(etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{
			ServerIssuerRef:         issuer("ca"),
			OperatorClientIssuerRef: &etcdv1.IssuerReference{Name: "ca", Kind: "ClusterIssuer"},
		}}),
		withPeerTLS(etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: issuer("ca")}}))
	requireCreate(t, c)

	got := &etcdv1.EtcdCluster{}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	cm := got.Spec.TLS.Client.CertManager
	if cm.ServerIssuerRef.Kind != "Issuer" || got.Spec.TLS.Peer.CertManager.IssuerRef.Kind != "Issuer" {
		t.Errorf("issuer kinds = %q, %q; want the default Issuer",
			cm.ServerIssuerRef.Kind, got.Spec.TLS.Peer.CertManager.IssuerRef.Kind)
	}
	if cm.OperatorClientIssuerRef.Kind != "ClusterIssuer" {
		t.Errorf("an explicit ClusterIssuer became %q", cm.OperatorClientIssuerRef.Kind)
	}
}

// A one-off snapshot keeps its file when deleted unless told otherwise (as VolumeSnapshot
// does); a schedule's snapshots take their files with them when retention expires them.
func TestSnapshotDeletionPolicyDefaults(t *testing.T) {
	snap, sched := newSnapshot("defaults-snap"), newSchedule("defaults-sched")
	requireCreate(t, snap)
	requireCreate(t, sched)
	if snap.Spec.DeletionPolicy != etcdv1.SnapshotRetain || sched.Spec.DeletionPolicy != etcdv1.SnapshotDelete {
		t.Errorf("deletionPolicy defaults: snapshot %q (want Retain), schedule %q (want Delete)", snap.Spec.DeletionPolicy, sched.Spec.DeletionPolicy)
	}
}

// An EtcdDefragPolicy without concurrencyPolicy forbids overlapping passes, as Cozystack's does.
func TestDefragPolicyConcurrencyDefaultsToForbid(t *testing.T) {
	p := newDefragPolicy("defaults-defrag-policy")
	requireCreate(t, p)
	if p.Spec.ConcurrencyPolicy != etcdv1.DefragConcurrencyForbid {
		t.Errorf("concurrencyPolicy default %q, want Forbid", p.Spec.ConcurrencyPolicy)
	}
}

func TestValidSpecsAreAccepted(t *testing.T) {
	memory := etcdv1.StorageMediumMemory
	valid := []client.Object{
		newCluster("ok-single", withReplicas(1)),
		newCluster("ok-paused", withReplicas(0)),
		newCluster("ok-seven", withReplicas(7), withVersion("3.5.35")),
		// Every 3.5 patch, as the official guide writes it (with a v) and as Cozystack's
		// fixtures and older operators run it; and 3.7.
		newCluster("ok-oldest-35", withVersion("3.5.0")),
		newCluster("ok-cozystack-fixture", withVersion("3.5.17")),
		newCluster("ok-guide", withVersion("v3.5.21")),
		newCluster("ok-37", withVersion("3.7.3")),
		newCluster("ok-37-v", withVersion("v3.7.3")),
		newCluster("ok-tmpfs", withStorage("512Mi", memory)),
		newCluster("ok-smallest-tmpfs", withStorage("256Mi", memory)),
		newCluster("ok-byo-mtls",
			withClientTLS(etcdv1.ClientTLS{ServerSecretRef: ref("srv"), OperatorClientSecretRef: ref("op")}),
			withPeerTLS(etcdv1.PeerTLS{SecretRef: ref("peer")}),
			withAuth(etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: ref("root")})),
		newCluster("ok-auth-off", withAuth(etcdv1.AuthSpec{Enabled: false})),
		newCluster("ok-lifetime", withIssuedClientTLS("ca"), withLifetime("87600h", "720h")),
		newCluster("ok-shortest-lifetime", withPeerTLS(etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: issuer("ca")}}), withLifetime("1h", "5m")),
		newCluster("ok-renew-only", withIssuedClientTLS("ca"), withLifetime("", "2159h")),
		newCluster("ok-restore-s3", withRestore(etcdv1.RestoreSource{S3: s3("example/nightly.db")})),
		newCluster("ok-restore-pvc", withRestore(etcdv1.RestoreSource{PVC: pvc("snapshots/example.db")})),
		newCluster("ok-restore-snapshot", withRestore(etcdv1.RestoreSource{SnapshotRef: ref("nightly-1764547200")})),
		newCluster("ok-options", withOptions(etcdv1.EtcdOptions{
			QuotaBackendBytes:       qtyPtr("8Gi"),
			AutoCompactionMode:      etcdv1.AutoCompactionPeriodic,
			AutoCompactionRetention: "1h30m",
			SnapshotCount:           ptr[int64](10000),
		})),
		newCluster("ok-revision", withOptions(etcdv1.EtcdOptions{AutoCompactionMode: etcdv1.AutoCompactionRevision, AutoCompactionRetention: "1000"})),
		newCluster("ok-metadata", func(c *etcdv1.EtcdCluster) {
			c.Spec.AdditionalMetadata = &etcdv1.AdditionalMetadata{Labels: map[string]string{"team": "storage"}}
			c.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
			c.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
			}}
		}),
		newCluster("ok-name-of-56-characters-" + strings.Repeat("x", 56-len("ok-name-of-56-characters-"))),
		newCluster("ok-delete-pvcs", func(c *etcdv1.EtcdCluster) {
			c.Spec.PersistentVolumeClaimRetentionPolicy = &etcdv1.PVCRetentionPolicy{WhenDeleted: etcdv1.PVCDelete}
		}),
		newCluster("ok-network-policy", func(c *etcdv1.EtcdCluster) {
			c.Spec.NetworkPolicy = &etcdv1.NetworkPolicySpec{Enabled: true, ClientSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"etcd-client": "true"}}}
		}),
		newSnapshot("ok-snap-s3"),
		newSnapshot("ok-snap-pvc", func(s *etcdv1.EtcdSnapshot) { s.Spec.Destination = etcdv1.SnapshotLocation{PVC: pvc("")} }),
		newSnapshot("ok-snap-delete", func(s *etcdv1.EtcdSnapshot) {
			s.Spec.DeletionPolicy, s.Spec.ActiveDeadlineSeconds = etcdv1.SnapshotDelete, ptr[int64](600)
		}),
		// No credentials Secret: the default chain, with the named ServiceAccount's identity.
		newSnapshot("ok-snap-irsa", func(s *etcdv1.EtcdSnapshot) {
			s.Spec.Destination.S3.CredentialsSecretRef, s.Spec.Destination.S3.ServiceAccountName = corev1.LocalObjectReference{}, "etcd-backup"
			s.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: *qtyPtr("512Mi")}}
		}),
		newCluster("ok-restore-instance-role", withRestore(etcdv1.RestoreSource{S3: func() *etcdv1.S3SnapshotLocation {
			l := s3("example/nightly.db")
			l.CredentialsSecretRef = corev1.LocalObjectReference{}
			return l
		}()})),
		newSchedule("ok-sched-s3"),
		newSchedule("ok-sched-pvc", func(s *etcdv1.EtcdSnapshotSchedule) {
			s.Spec.Destination = etcdv1.SnapshotLocation{PVC: pvc("nightly")}
			s.Spec.Schedule, s.Spec.TimeZone, s.Spec.Suspend = "*/15 2-5 * * 1-5", "Europe/Berlin", true
			s.Spec.Retention = etcdv1.SnapshotRetention{KeepLast: ptr[int32](7), MaxAge: &metav1.Duration{Duration: 168 * time.Hour}}
		}),
		newDefrag("ok-defrag-default"),
		newDefrag("ok-defrag-all", withRule(etcdv1.DefragRule{All: true})),
		newDefrag("ok-defrag-guarded", withRule(etcdv1.DefragRule{FreeSpaceAbove: qtyPtr("200Mi"), QuotaUsageAbove: "80%", MinReclaim: qtyPtr("32Mi")}),
			func(d *etcdv1.EtcdDefrag) { d.Spec.TTLSecondsAfterFinished = ptr[int32](3600) }),
		newCluster("ok-defrag-schedule", func(c *etcdv1.EtcdCluster) {
			c.Spec.Defrag = &etcdv1.DefragSchedule{Schedule: "0 3 * * *", Rule: &etcdv1.DefragRule{QuotaUsageAbove: "80%"}}
			c.Spec.Alarms = &etcdv1.AlarmPolicy{NoSpace: etcdv1.NoSpaceReport}
		}),
		newDefragPolicy("ok-defrag-policy-minimal"),
		newDefragPolicy("ok-defrag-policy-full", func(p *etcdv1.EtcdDefragPolicy) {
			p.Spec.Suspend, p.Spec.ConcurrencyPolicy = ptr(true), etcdv1.DefragConcurrencyAllow
			p.Spec.StartingDeadlineSeconds, p.Spec.HistoryLimit, p.Spec.TTLSecondsAfterFinished = ptr[int64](0), ptr[int32](0), ptr[int32](3600)
			p.Spec.Rule = &etcdv1.DefragRule{FreeSpaceAbove: qtyPtr("200Mi"), QuotaUsageAbove: "80%", MinReclaim: qtyPtr("32Mi")}
		}),
		newDefragPolicy("ok-defrag-policy-zone", func(p *etcdv1.EtcdDefragPolicy) { p.Spec.Schedule = "CRON_TZ=Europe/Berlin 30 2 * * 1-5" }),
		newDefragPolicy("ok-defrag-policy-daily", func(p *etcdv1.EtcdDefragPolicy) { p.Spec.Schedule = "@daily" }),
		newDefragPolicy("ok-defrag-policy-every", func(p *etcdv1.EtcdDefragPolicy) { p.Spec.Schedule = "@every 6h" }),
		newMember("ok-member"),
		newMember("ok-adopted-root", adoptedAt("/var/lib/etcd")),
		newMember("ok-adopted-subdir", adoptedAt("/var/lib/etcd/default.etcd")),
	}
	for _, obj := range valid {
		t.Run(obj.GetName(), func(t *testing.T) {
			if err := k8s.Create(t.Context(), obj); err != nil {
				t.Fatalf("%s refused: %v", describe(obj), err)
			}
		})
	}
}

// A newer patch and the next minor are accepted, one after the other, from the oldest
// accepted version, with or without a leading v.
func TestVersionUpgradesAreAccepted(t *testing.T) {
	c := newCluster("upgrades", withVersion("3.5.0"))
	requireCreate(t, c)
	for _, v := range []string{"v3.5.21", "3.5.35", "3.5.36", "3.6.15", "v3.6.16", "3.7.0", "v3.7.3"} {
		withVersion(v)(c)
		if err := k8s.Update(t.Context(), c); err != nil {
			t.Fatalf("the upgrade to %s was refused: %v", v, err)
		}
	}
}

// spec.storage.size may grow on a running cluster (PVC and tmpfs alike), in steps; the same
// size written differently is no shrink.
func TestStorageGrowthIsAccepted(t *testing.T) {
	for _, medium := range []etcdv1.StorageMedium{"", etcdv1.StorageMediumMemory} {
		c := newCluster("grow-"+strings.ToLower(string(medium)+"pvc"), withStorage("1Gi", medium))
		requireCreate(t, c)
		for _, size := range []string{"2Gi", "2048Mi", "10Gi"} {
			withStorage(size, medium)(c)
			if err := k8s.Update(t.Context(), c); err != nil {
				t.Fatalf("medium %q: growing to %s was refused: %v", medium, size, err)
			}
		}
	}
}

// The certificates' lifetime may change on a running cluster, though the rest of spec.tls
// may not; the rest still may not change along with it.
func TestCertificateLifetimeMayChange(t *testing.T) {
	c := newCluster("lifetime-edits", withIssuedClientTLS("ca"))
	requireCreate(t, c)
	for _, l := range [][2]string{{"8760h", ""}, {"8760h", "1440h"}, {"", "100h"}, {"", ""}} {
		withLifetime(l[0], l[1])(c)
		if err := k8s.Update(t.Context(), c); err != nil {
			t.Fatalf("validityDuration %q renewBefore %q refused: %v", l[0], l[1], err)
		}
	}
	withLifetime("4380h", "")(c)
	withClientTLS(etcdv1.ClientTLS{ServerSecretRef: ref("server")})(c)
	requireInvalid(t, k8s.Update(t.Context(), c), "spec.tls cannot be added, removed or changed on an existing cluster yet (only its validityDuration and renewBefore can, and the issuers of certManager, which rotates the CA)")
}

// The issuers of certManager may change on a running cluster, each side and all at once:
// that rotates the CAs (docs/tls.md, "Rotating a CA"); the transport stays as it was.
func TestCertManagerIssuersMayChange(t *testing.T) {
	mutual := func(server, clients, peers string) clusterEdit {
		return func(c *etcdv1.EtcdCluster) {
			withClientTLS(etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: issuer(server), OperatorClientIssuerRef: ptr(issuer(clients))}})(c)
			withPeerTLS(etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: issuer(peers)}})(c)
		}
	}
	server := newCluster("ca-rotation-server", withIssuedClientTLS("ca"))
	requireCreate(t, server)
	withIssuedClientTLS("ca-2027")(server)
	if err := k8s.Update(t.Context(), server); err != nil {
		t.Fatalf("a new server issuer refused: %v", err)
	}
	c := newCluster("ca-rotation", mutual("ca", "ca", "ca"))
	requireCreate(t, c)
	for _, next := range [][3]string{{"ca-2", "ca", "ca"}, {"ca-2", "ca-2", "ca"}, {"ca-2", "ca-2", "ca-2"}, {"ca-3", "ca-3", "ca-3"}} {
		mutual(next[0], next[1], next[2])(c)
		if err := k8s.Update(t.Context(), c); err != nil {
			t.Fatalf("issuers %v refused: %v", next, err)
		}
	}
}

func TestAllowedClusterEditsAreAccepted(t *testing.T) {
	c := newCluster("edits", withStorage("1Gi", ""))
	requireCreate(t, c)
	edits := map[string]clusterEdit{
		"scale out": withReplicas(5),
		"pause":     withReplicas(0),
		"resume":    withReplicas(3),
		"options":   withOptions(etcdv1.EtcdOptions{SnapshotCount: ptr[int64](5000)}),
		"metadata": func(c *etcdv1.EtcdCluster) {
			c.Spec.AdditionalMetadata = &etcdv1.AdditionalMetadata{Annotations: map[string]string{"owner": "team-a"}}
		},
		"resources": func(c *etcdv1.EtcdCluster) {
			c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: qty("500m")}
		},
		"same size written differently": withStorage("1024Mi", ""),
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			edit(c)
			if err := k8s.Update(t.Context(), c); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

func TestScaleSubresource(t *testing.T) {
	c := newCluster("scalable")
	requireCreate(t, c)
	c.Status.ReadyMembers = 2
	c.Status.Selector = "app.kubernetes.io/instance=scalable"
	if err := k8s.Status().Update(t.Context(), c); err != nil {
		t.Fatalf("writing status: %v", err)
	}

	scale := &autoscalingv1.Scale{}
	if err := k8s.SubResource("scale").Get(t.Context(), c, scale); err != nil {
		t.Fatalf("reading /scale: %v", err)
	}
	if scale.Spec.Replicas != 3 || scale.Status.Replicas != 2 || scale.Status.Selector != c.Status.Selector {
		t.Fatalf("/scale = spec %d, status %d, selector %q; want 3, 2, %q",
			scale.Spec.Replicas, scale.Status.Replicas, scale.Status.Selector, c.Status.Selector)
	}

	scale.Spec.Replicas = 5
	if err := k8s.SubResource("scale").Update(t.Context(), c, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("writing /scale: %v", err)
	}
	got := &etcdv1.EtcdCluster{}
	if err := k8s.Get(t.Context(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 5 {
		t.Fatalf("spec.replicas = %d after scaling to 5", *got.Spec.Replicas)
	}

	scale.Spec.Replicas = -2
	err := k8s.SubResource("scale").Update(t.Context(), c, client.WithSubResourceBody(scale))
	requireInvalid(t, err, "spec.replicas")
}

// TestKubectlServerSideDryRun is what a user does first: apply the CRDs and the samples with
// the kubectl built by the test bed, validated by the apiserver but not stored.
func TestKubectlServerSideDryRun(t *testing.T) {
	kubectl := filepath.Join(assetsDir, "kubectl")
	for _, dir := range []string{"crd/bases", "samples"} {
		path := filepath.Join(repoRoot, "config", dir)
		out, err := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", kubeconfig, "apply",
			"--dry-run=server", "-n", ns, "-f", path).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl apply --dry-run=server -f %s: %v\n%s", path, err, out)
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(string(out), "(server dry run)"); got != len(entries) {
			t.Fatalf("kubectl dry-ran %d objects of %d files in %s:\n%s", got, len(entries), path, out)
		}
	}
}

func TestKubectlShowsPrinterColumns(t *testing.T) {
	c := newCluster("columns", withReplicas(5))
	requireCreate(t, c)
	out, err := exec.CommandContext(t.Context(), filepath.Join(assetsDir, "kubectl"), "--kubeconfig", kubeconfig,
		"get", "etcd", "columns", "-n", ns).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get etcd (short name): %v\n%s", err, out)
	}
	header := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
	want := []string{"NAME", "REPLICAS", "READY", "VERSION", "AVAILABLE", "AGE"}
	if strings.Join(header, " ") != strings.Join(want, " ") {
		t.Fatalf("columns %v, want %v", header, want)
	}
	if !strings.Contains(string(out), "3.6.16") {
		t.Fatalf("row does not show the version:\n%s", out)
	}
}
