package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
	"github.com/quorumkeeper/etcd-operator/test/clusterenv"
	"github.com/quorumkeeper/etcd-operator/test/docs"
	"github.com/quorumkeeper/etcd-operator/test/robustness"
)

// bothCAs is a client configuration that trusts the old and the new CA for the server and
// holds the application certificates of both: TLS tells it which CAs a member accepts, and it
// presents the first of its certificates one of them signed.
func bothCAs(t *testing.T, ns string, oldApp, newApp string) *tls.Config {
	t.Helper()
	var cas []byte
	var pairs []tls.Certificate
	for _, name := range []string{oldApp, newApp} {
		s := getSecret(t, ns, name)
		cas = append(cas, s.Data[specs.SecretKeyCA]...)
		pair, err := tls.X509KeyPair(s.Data[specs.SecretKeyCert], s.Data[specs.SecretKeyKey])
		if err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, pair)
	}
	return verifiedTLS(t, cas, clientServiceHost(ns, journeyCluster), pairs...)
}

// docs/tls.md, "Rotating a CA", as a reader runs it on the journey's cluster (docs/tls-journey.md
// steps 1 to 4, made by the test): a key written through a member, the new CA, its Issuer
// and the application's certificate of it, the one change of the issuers and the wait for
// CARotation=False, then the section's checks (the stage, the three certificates' issuer,
// every member healthy to etcdctl with the new CA alone, the key read back). From the new
// application certificate on, a client with both application certificates writes: no two
// members restart at once (each restarts twice: to trust both CAs, then to drop the old one),
// every stage is announced, and at the end every member serves certificates of the new CA on
// both ports and refuses the old CA's client certificate, the key reads back through the
// client Service with the new certificate, the operator, with its new client certificate,
// still scales the cluster, and no acknowledged write is lost and none failed but what the
// restarts explain. A schedule archives the cluster throughout: its archiver, started again
// at each stage, reaches the members whichever CA they serve, and archives what was written
// after the rotation.
func TestCARotationUnderAWriter(t *testing.T) {
	t.Parallel()
	w := readSection(t, "docs/tls.md", "## Rotating a CA")
	ns, bucket := s3Namespace(t)
	journeyCA(t, ns)
	applyJourney(t, ns, "etcd-cluster.yaml")
	before := waitSettled(t, ns, journeyCluster, 3, 5*time.Minute)
	create(t, &etcdv1.EtcdSnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: "archived", Namespace: ns},
		Spec: etcdv1.EtcdSnapshotScheduleSpec{ClusterRef: corev1.LocalObjectReference{Name: journeyCluster}, Schedule: "0 3 * * *",
			Destination: s3Location(t, bucket, "rotation/"),
			Archive:     &etcdv1.SnapshotArchive{SegmentInterval: &metav1.Duration{Duration: time.Second}}}})
	oldApp := journeyAppClient(t, ns)
	var names []string
	for _, m := range before.Status.Members {
		names = append(names, m.Name)
	}

	sh := sectionShell(t, ns, w)
	var pods *podTracker
	var writer *writer
	checked := 0
	runSection(t, "tls.md", sh, w.Commands, func(c docs.Command, stdout string) string {
		switch {
		case strings.HasPrefix(c.Text, "kubectl wait --for=condition=Ready issuer/etcd-ca-2027"):
			// The new application certificate exists: the writer holds both from here on.
			pods = trackMemberPods(t, ns, journeyCluster, names)
			writer = startWriterWith(t, ns, journeyCluster, "ca-rotation", access{TLS: bothCAs(t, ns, "app-client-tls", "app-client-2027-tls")})
		case strings.Contains(c.Text, "-o jsonpath='{.items[*].spec.issuerRef.name}'"):
			checked++
			if stdout != "etcd-ca-2027 etcd-ca-2027 etcd-ca-2027" {
				return "want the three certificates issued by etcd-ca-2027"
			}
		case strings.HasPrefix(c.Text, "etcdctl endpoint health --cluster"):
			checked++
			return healthyMembers(stdout, 3)
		}
		return ""
	})
	if writer == nil || checked != 2 {
		t.Fatalf("the writer started (%v) and %d of the section's two checks (the certificates' issuer, endpoint health) ran", writer != nil, checked)
	}
	c := getCluster(t, ns, journeyCluster)
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionCARotation); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != etcdv1.ReasonCARotated {
		t.Fatalf("CARotation %+v after the section; want False CARotated", cond)
	}
	finishTwoRolls(t, pods, names, "trust both CAs, drop the old")
	checkRotationEvents(t, ns)

	newApp := getSecret(t, ns, "app-client-2027-tls")
	onlyNew := secretTLS(t, newApp, clientServiceHost(ns, journeyCluster))
	waitServed(t, ns, journeyCluster, specs.ClientPort, onlyNew, secretSerial(t, ns, "secure-server-tls"))
	peerOnlyNew := secretTLS(t, newApp, specs.HeadlessServiceName(journeyCluster)+"."+ns+".svc")
	waitServed(t, ns, journeyCluster, specs.PeerPort, peerOnlyNew, secretSerial(t, ns, "secure-peer-tls"))
	oldClient := secretTLS(t, oldApp, clientServiceHost(ns, journeyCluster))
	oldClient.InsecureSkipVerify = true //nolint:gosec // only the member's verdict on the old client certificate matters
	refusesOldClient(t, ns, journeyCluster, oldClient)
	bundle := getSecret(t, ns, "secure-ca-bundle")
	if n := strings.Count(string(bundle.Data[specs.CABundleKeyPeer]), "BEGIN CERTIFICATE"); n != 1 {
		t.Errorf("the bundle's peer CAs after the rotation: %d certificates; want the new CA alone", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := dialClusterWith(t, ns, journeyCluster, access{TLS: onlyNew}).Get(ctx, "before-rotation")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "kept" {
		t.Fatalf("before-rotation after the rotation: %v; want kept", got.Kvs)
	}

	setReplicas(t, ns, journeyCluster, 4)
	waitSettled(t, ns, journeyCluster, 4, 5*time.Minute)
	stopAndVerifyRotationWrites(t, ns, writer)
	archivedPast(t, ns, "archived", got.Header.Revision)
}

// archivedPast waits until the schedule's archiver has stored every revision up to rev, with
// no store error.
func archivedPast(t *testing.T, ns, schedule string, rev int64) {
	t.Helper()
	eventually(t, 3*time.Minute, fmt.Sprintf("schedule %s archived past revision %d", schedule, rev), func() error {
		a := getSchedule(t, ns, schedule).Status.Archive
		switch {
		case a == nil || a.Archived == nil:
			return errors.New("nothing archived yet")
		case a.StoreError != "":
			return fmt.Errorf("store error: %s", a.StoreError)
		case a.Archived.LastRevision < rev:
			return fmt.Errorf("archived up to revision %d", a.Archived.LastRevision)
		}
		return nil
	})
}

// finishTwoRolls stops tracking the member Pods and checks that they restarted one at a time,
// each member twice (rolls says which two rolls).
func finishTwoRolls(t *testing.T, pods *podTracker, names []string, rolls string) {
	t.Helper()
	restarts := pods.finish(t)
	if restarts.MostAtOnce != 1 {
		t.Errorf("%d members restarted at once during the rotation; want 1", restarts.MostAtOnce)
	}
	for _, m := range names {
		if restarts.Replaced[m] != 2 {
			t.Errorf("member Pods replaced %v times; want twice each (%s)", restarts.Replaced, rolls)
			break
		}
	}
}

// stopAndVerifyRotationWrites stops the writer and reads every acknowledged write back; no
// put may have failed, but as leadership moved (onlyLeaderMoveFailures: before restarting the
// leader, in each roll).
func stopAndVerifyRotationWrites(t *testing.T, ns string, w *writer) {
	t.Helper()
	w.stopAndVerify(t, 20)
	onlyLeaderMoveFailures(t, ns, w, "the CA rotation")
}

// onlyLeaderMoveFailures fails the test unless every put of w that failed so far failed as
// leadership moved, at most one per move the operator announced in ns (LeaderMoved events;
// etcdload's OnlyLeaderMoveFailures).
func onlyLeaderMoveFailures(t *testing.T, ns string, w *writer, what string) {
	t.Helper()
	w.OnlyLeaderMoveFailures(t, eventCount(t, ns, etcdv1.ReasonLeaderMoved), what)
}

// eventCount is how many times events of the namespace said reason, repeats included.
func eventCount(t *testing.T, ns, reason string) int {
	t.Helper()
	n, err := clusterenv.EventCount(context.Background(), k8s, ns, reason)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkRotationEvents asserts that the cluster announced each stage of the rotation.
func checkRotationEvents(t *testing.T, ns string) {
	t.Helper()
	eventually(t, 30*time.Second, "an event for each stage of the CA rotation", func() error {
		list := &eventsv1.EventList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, e := range list.Items {
			if e.Regarding.Name == journeyCluster {
				seen[e.Reason] = true
			}
		}
		for _, stage := range []string{etcdv1.ReasonTrustingBoth, etcdv1.ReasonReissuingOnNewCA, etcdv1.ReasonOperatorClientMoved,
			etcdv1.ReasonDroppingOldCA, etcdv1.ReasonCARotated} {
			if !seen[stage] {
				return fmt.Errorf("no %s event (seen %v)", stage, seen)
			}
		}
		return nil
	})
}

// A cluster with the user's own Secrets moves to a new CA in the three steps of docs/tls.md
// ("With your own Secrets") while a client with certificates of both CAs writes: the new CA
// put into ca.crt beside the old restarts each member once, the certificates of the new CA
// restart nobody, the old CA taken out restarts each member once more; no write fails but the
// put in flight on a member that stops, no two
// members restart at once, and at the end the old CA's client certificate is refused.
func TestCARotationOfOwnSecretsUnderAWriter(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	const name = "byo-rotate"
	c := byoCluster(ns, name, 3)
	oldCA, newCA := testpki.NewCANamed(t, "byo old CA"), testpki.NewCANamed(t, "byo new CA")
	requests := byoRequests(c)
	for secret, r := range requests {
		create(t, tlsSecret(ns, secret, oldCA.SecretData(t, r)))
	}
	create(t, c)
	before := waitSettled(t, ns, name, 3, 5*time.Minute)

	clientUsage := testpki.Request{CommonName: "app", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	oldApp, newApp := oldCA.Issue(t, clientUsage), newCA.Issue(t, clientUsage)
	cfg := clientOfBoth(t, oldCA, newCA, oldApp, newApp, clientServiceHost(ns, name))
	var names []string
	for _, m := range before.Status.Members {
		names = append(names, m.Name)
	}
	pods := trackMemberPods(t, ns, name, names)
	writer := startWriterWith(t, ns, name, name, access{TLS: cfg})

	both := append(append([]byte{}, oldCA.PEM...), newCA.PEM...)
	setSecrets := func(ca *testpki.CA, caPEM []byte) {
		for secret, r := range requests {
			s := getSecret(t, ns, secret)
			if ca != nil {
				s.Data = ca.SecretData(t, r)
			}
			s.Data[specs.SecretKeyCA] = caPEM
			if err := k8s.Update(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		}
	}
	setSecrets(nil, both) // 1. the new CA beside the old
	waitReloaded(t, ns, name, before.Status.CARotation)
	step1 := getCluster(t, ns, name).Status.CARotation

	setSecrets(newCA, both) // 2. certificates of the new CA
	newServer, err := parseCertificate(getSecret(t, ns, name+"-server").Data[specs.SecretKeyCert])
	if err != nil {
		t.Fatal(err)
	}
	onlyNew := clientTLS(t, newCA.PEM, newApp.CertPEM, newApp.KeyPEM, clientServiceHost(ns, name))
	waitServed(t, ns, name, specs.ClientPort, onlyNew, newServer.SerialNumber.String())

	setSecrets(nil, newCA.PEM) // 3. the old CA taken out
	waitReloaded(t, ns, name, step1)

	finishTwoRolls(t, pods, names, "steps 1 and 3; step 2 restarts nobody")
	oldClient := clientTLS(t, newCA.PEM, oldApp.CertPEM, oldApp.KeyPEM, clientServiceHost(ns, name))
	oldClient.InsecureSkipVerify = true //nolint:gosec // only the member's verdict on the old client certificate matters
	refusesOldClient(t, ns, name, oldClient)
	stopAndVerifyRotationWrites(t, ns, writer)
}

// waitReloaded waits until the cluster recorded a ca.crt other than the one of last and every
// member restarted with it (CARotation False, CARotated).
func waitReloaded(t *testing.T, ns, name string, last *etcdv1.CARotationStatus) {
	t.Helper()
	eventually(t, 10*time.Minute, "every member restarted with the changed ca.crt", func() error {
		c := getCluster(t, ns, name)
		rot := c.Status.CARotation
		if rot == nil || (last != nil && rot.SecretsHash == last.SecretsHash) {
			return fmt.Errorf("the change of ca.crt is not recorded yet: %+v", rot)
		}
		if rot.Stage != etcdv1.ReasonCARotated {
			return fmt.Errorf("stage %s", rot.Stage)
		}
		if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1.ConditionCARotation); cond == nil || cond.Reason != etcdv1.ReasonCARotated {
			return fmt.Errorf("CARotation %+v", cond)
		}
		return nil
	})
}

// clientOfBoth trusts both CAs for the server and holds a client certificate of each.
func clientOfBoth(t *testing.T, oldCA, newCA *testpki.CA, oldApp, newApp testpki.Leaf, serverName string) *tls.Config {
	t.Helper()
	var pairs []tls.Certificate
	for _, l := range []testpki.Leaf{oldApp, newApp} {
		pair, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, pair)
	}
	return verifiedTLS(t, append(append([]byte{}, oldCA.PEM...), newCA.PEM...), serverName, pairs...)
}

// verifiedTLS is robustness.ClientTLSWith that fails the test on bad PEM data: the server's
// certificate checked for serverName, whatever address gRPC dials (a plain tls.Config's
// ServerName is replaced by the member's address, which no certificate names).
func verifiedTLS(t *testing.T, caPEM []byte, serverName string, pairs ...tls.Certificate) *tls.Config {
	t.Helper()
	cfg, err := robustness.ClientTLSWith(caPEM, serverName, pairs...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// refusesOldClient asserts that every member refuses cfg's client certificate (the old CA's)
// on the client and the peer port.
func refusesOldClient(t *testing.T, ns, cluster string, cfg *tls.Config) {
	t.Helper()
	for pod, ip := range memberIPs(t, ns, cluster) {
		for _, port := range []int{specs.ClientPort, specs.PeerPort} {
			if err := serverVerdict(ip, port, cfg); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("%s accepted the old CA's client certificate on port %d after the rotation (%v)", pod, port, err)
			}
		}
	}
}
