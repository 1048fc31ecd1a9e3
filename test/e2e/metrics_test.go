package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/metrics"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
	"github.com/quorumkeeper/etcd-operator/test/operatormetrics"
)

// The operator's metrics are served over HTTPS to a metrics reader's token only, and its own
// series follow a scale from 1 to 3 members.
func TestMetricsAreSecureAndFollowAScale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ip := operatorPodIP(t)
	// Without a token: 401. A token the API server does not know: controller-runtime's filter
	// answers 500 "Authentication failed" (the TokenReview reports an error, not a plain no).
	// Either way no metric is served.
	refusals := []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a made-up token", "not-a-token", http.StatusInternalServerError},
	}
	for _, r := range refusals {
		status, body, err := operatormetrics.Get(ctx, ip, r.token)
		if err != nil {
			t.Fatalf("scrape with %s: %v", r.name, err)
		}
		if status != r.want || bytes.Contains(body, []byte(metrics.MembersName)) {
			t.Errorf("scrape with %s: HTTP %d, want %d and no metrics; body starts %.80q", r.name, status, r.want, body)
		}
	}
	token, err := operatormetrics.Token(ctx, kubeClientset(t))
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)
	createCluster(t, ns, "metrics", 1)
	waitSettled(t, ns, "metrics", 1, 3*time.Minute)
	before := scrapeOperator(t, ip, token)
	setReplicas(t, ns, "metrics", 3)
	waitSettled(t, ns, "metrics", 3, 5*time.Minute)
	var after map[string]*dto.MetricFamily
	// The scrape reads the operator's cache, which may lag the status just read by a moment.
	eventually(t, 30*time.Second, "metrics show 3 ready voters", func() error {
		after = scrapeOperator(t, ip, token)
		if got := sample(after, metrics.MembersName, map[string]string{"namespace": ns, "cluster": "metrics", "role": "Voter", "ready": "true"}); got != 3 {
			return fmt.Errorf("ready voters = %v", got)
		}
		return nil
	})
	cluster := map[string]string{"namespace": ns, "cluster": "metrics"}
	// The membership counters have no cluster label (one series per kind and result): tests
	// running alongside this one add members too, so the scale's two are a floor.
	atLeast := func(what string, got, want float64) {
		if got < want {
			t.Errorf("%s: %v, want at least %v", what, got, want)
		}
	}
	atLeast("members added by the scale", delta(before, after, metrics.MembershipChangesName, map[string]string{"kind": "add", "result": "success"}), 2)
	atLeast("members promoted by the scale", delta(before, after, metrics.MembershipChangesName, map[string]string{"kind": "promote", "result": "success"}), 2)
	checks := []struct {
		what string
		got  float64
		want float64
	}{
		{"learners", sample(after, metrics.MembersName, map[string]string{"namespace": ns, "cluster": "metrics", "role": "Learner"}), 0},
		{"desired members", sample(after, metrics.MembersDesiredName, cluster), 3},
		{"Available phase", sample(after, metrics.ClusterPhaseName, map[string]string{"namespace": ns, "cluster": "metrics", "phase": "Available"}), 1},
		{"no other phase", sample(after, metrics.ClusterPhaseName, cluster), 1},
		// the version that runs (status.version), which a settled cluster has reached
		{"cluster_info of the version running", sample(after, metrics.ClusterInfoName, map[string]string{"namespace": ns, "cluster": "metrics", "version": etcdVersion}), 1},
		{"Available condition", sample(after, metrics.ClusterConditionName, map[string]string{"namespace": ns, "cluster": "metrics", "condition": "Available"}), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if n := after[metrics.TimeToAvailableName].GetMetric(); len(n) == 0 || n[0].GetHistogram().GetSampleCount() == 0 {
		t.Errorf("%s has no sample after a cluster became Available", metrics.TimeToAvailableName)
	}
}

// The series of issue 21, scraped from the leader with the values the objects hold: the
// build, the running version, a snapshot's success per cluster and its completion time, a
// (suspended) schedule's creation, and the expiry of each certificate of a cluster that
// brings its own Secrets, whose earliest the status carries too.
func TestMetricsOfBackupsAndCertificates(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	const name = "watched"
	c := byoCluster(ns, name, 1)
	ca := testpki.NewCA(t)
	// The server certificate expires first (in 6 hours, the others and the CA in 24).
	serverEnd := time.Now().Add(6 * time.Hour).Truncate(time.Second)
	requests := byoRequests(c)
	server := requests["watched-server"]
	server.NotAfter = serverEnd
	requests["watched-server"] = server
	leaves := map[string]*x509.Certificate{}
	for secret, r := range requests {
		data := ca.SecretData(t, r)
		cert, err := parseCertificate(data[specs.SecretKeyCert])
		if err != nil {
			t.Fatal(err)
		}
		leaves[secret] = cert
		create(t, tlsSecret(ns, secret, data))
	}
	create(t, c)
	waitSettled(t, ns, name, 1, 5*time.Minute)

	create(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}})
	dest := etcdv1.SnapshotLocation{PVC: &etcdv1.PVCSnapshotLocation{ClaimName: "backups", SubPath: "etcd"}}
	createSnapshot(t, ns, "first", name, dest)
	snap := waitSnapshotDone(t, ns, "first", etcdv1.SnapshotComplete)
	create(t, &etcdv1.EtcdSnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: "paused", Namespace: ns},
		Spec: etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: corev1.LocalObjectReference{Name: name}, Schedule: "0 3 * * *", Suspend: true, Destination: dest}})
	schedule := getSchedule(t, ns, "paused")

	stored := getCluster(t, ns, name)
	if at := stored.Status.CertificatesNotAfter; at == nil || !at.Time.Equal(serverEnd) {
		t.Errorf("status.certificatesNotAfter %v, want the server certificate's %v", at, serverEnd)
	}
	token, err := operatormetrics.Token(context.Background(), kubeClientset(t))
	if err != nil {
		t.Fatal(err)
	}
	of := func(more ...string) map[string]string {
		labels := map[string]string{"namespace": ns, "cluster": name}
		for i := 0; i+1 < len(more); i += 2 {
			labels[more[i]] = more[i+1]
		}
		return labels
	}
	checks := []struct {
		what   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"the version running", metrics.ClusterInfoName, of("version", stored.Status.Version), 1},
		{"snapshots that succeeded", metrics.SnapshotsName, of("result", metrics.ResultSuccess), 1},
		{"snapshots that failed", metrics.SnapshotsName, of("result", metrics.ResultFailure), 0},
		{"the last success", metrics.SnapshotLastSuccessName, of(), float64(snap.Status.CompletionTime.Unix())},
		{"the suspended schedule", metrics.ScheduleCreatedName, of("schedule", "paused"), float64(schedule.CreationTimestamp.Unix())},
		{"the server certificate's expiry", metrics.CertificateExpiryName, of("secret", "watched-server", "key", specs.SecretKeyCert), float64(serverEnd.Unix())},
		{"the peer certificate's expiry", metrics.CertificateExpiryName, of("secret", "watched-peer", "key", specs.SecretKeyCert), float64(leaves["watched-peer"].NotAfter.Unix())},
		{"the operator's certificate's expiry", metrics.CertificateExpiryName, of("secret", "watched-operator", "key", specs.SecretKeyCert), float64(leaves["watched-operator"].NotAfter.Unix())},
		{"the CA's expiry", metrics.CertificateExpiryName, of("secret", "watched-server", "key", specs.SecretKeyCA), float64(ca.Cert.NotAfter.Unix())},
	}
	// The scrape reads the operator's cache, which may lag the objects just read by a moment;
	// other tests kill the operator meanwhile, so the leader is looked up on every try.
	eventually(t, 2*time.Minute, "the operator's series match the objects", func() error {
		ip, err := leaderIP(operatormetrics.Namespace, operatorLease)
		if err != nil {
			return err
		}
		families, err := scrape(ip, token)
		if err != nil {
			return err
		}
		if b := families[metrics.BuildInfoName].GetMetric(); len(b) != 1 || b[0].GetGauge().GetValue() != 1 {
			return fmt.Errorf("%s: %v, want one series at 1", metrics.BuildInfoName, b)
		}
		var wrong []string
		for _, check := range checks {
			if got := sample(families, check.metric, check.labels); got != check.want {
				wrong = append(wrong, fmt.Sprintf("%s: %v, want %v", check.what, got, check.want))
			}
		}
		if len(wrong) > 0 {
			return errors.New(strings.Join(wrong, "; "))
		}
		return nil
	})
}

func kubeClientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// operatorLease is the leader election Lease of the operator the local cluster runs.
const operatorLease = "etcd-operator.cozystack.io"

// operatorPodIP is the IP of the operator Pod that leads: only the leader serves the clusters'
// series (a standby's scrape has none of them). Other tests kill the operator meanwhile, so a
// Lease whose holder is gone is waited out.
func operatorPodIP(t *testing.T) string {
	t.Helper()
	return operatorPodIPIn(t, operatormetrics.Namespace, operatorLease)
}

// operatorPodIPIn is the IP of the operator Pod in namespace that holds the leader election
// Lease named lease.
func operatorPodIPIn(t *testing.T, namespace, lease string) string {
	t.Helper()
	var ip string
	eventually(t, 2*time.Minute, "a running operator Pod that holds the leader election Lease "+namespace+"/"+lease, func() (err error) {
		ip, err = leaderIP(namespace, lease)
		return err
	})
	return ip
}

func leaderIP(namespace, leaseName string) (string, error) {
	lease := &coordinationv1.Lease{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: leaseName}, lease); err != nil {
		return "", err
	}
	if lease.Spec.HolderIdentity == nil {
		return "", errors.New("the Lease has no holder")
	}
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(namespace),
		client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator"}); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		// The holder identity is "<hostname>_<uuid>", and a Pod's hostname is its name.
		if strings.HasPrefix(*lease.Spec.HolderIdentity, p.Name+"_") && p.DeletionTimestamp.IsZero() && p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			return p.Status.PodIP, nil
		}
	}
	return "", fmt.Errorf("the Lease's holder %s is no running operator Pod", *lease.Spec.HolderIdentity)
}

func scrapeOperator(t *testing.T, ip, token string) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := scrape(ip, token)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// scrape reads the operator at ip with a metrics reader's token.
func scrape(ip, token string) (map[string]*dto.MetricFamily, error) {
	status, body, err := operatormetrics.Get(context.Background(), ip, token)
	if err != nil {
		return nil, fmt.Errorf("scrape with a metrics reader's token: %w", err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("scrape with a metrics reader's token: HTTP %d: %.200s", status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(bytes.NewReader(body))
}

// sample sums the family's samples whose labels include want.
func sample(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, m := range families[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if match {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

func delta(before, after map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	return sample(after, name, want) - sample(before, name, want)
}
