package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/testpki"
)

// Before the operator has enabled authentication, a new cluster's members take writes from
// anyone who reaches them, and the headless Service names every member before it is ready.
// Here the window is held open: the operator's client certificate is from a CA etcd does not
// trust, so the operator cannot enable auth while the members form the cluster among
// themselves. A Pod of another namespace with a certificate from the cluster's own CA then
// tries to write through a member's DNS name and cannot connect; once the operator's
// certificate is fixed and auth is on, the same write reaches etcd and etcd refuses it.
func TestNoClientWritesBeforeAuthIsOn(t *testing.T) {
	t.Parallel()
	ns, elsewhere := namespace(t), namespace(t)
	const name = "window"
	c := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1.EtcdClusterSpec{Replicas: ptr(int32(3)), Version: etcdVersion,
			TLS: &etcdv1.EtcdClusterTLS{
				Client: &etcdv1.ClientTLS{ServerSecretRef: &corev1.LocalObjectReference{Name: "server"},
					OperatorClientSecretRef: &corev1.LocalObjectReference{Name: "operator"}},
				Peer: &etcdv1.PeerTLS{SecretRef: &corev1.LocalObjectReference{Name: "peer"}},
			},
			Auth: &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "root"}}},
	}
	ca, stranger := testpki.NewCA(t), testpki.NewCA(t)
	loopback := []string{"127.0.0.1", "::1"}
	clientOnly := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	operator := testpki.Request{CommonName: specs.OperatorClientCommonName, Usages: clientOnly}
	create(t, tlsSecret(ns, "server", ca.SecretData(t, testpki.Request{DNSNames: specs.ServerDNSNames(c, ""), IPs: loopback})))
	create(t, tlsSecret(ns, "peer", ca.SecretData(t, testpki.Request{DNSNames: specs.PeerDNSNames(c, ""), IPs: loopback})))
	create(t, tlsSecret(ns, "operator", stranger.SecretData(t, operator)))
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: ns}, Data: map[string][]byte{"password": []byte("a-long-root-password")}})
	create(t, tlsSecret(elsewhere, "app", ca.SecretData(t, testpki.Request{CommonName: "app", Usages: clientOnly})))
	create(t, c)

	member := waitMembersServing(t, ns, name, 3)
	if getCluster(t, ns, name).Status.AuthEnabled {
		t.Fatal("auth enabled although etcd refuses the operator's certificate")
	}
	host := fmt.Sprintf("%s.%s.%s.svc.cluster.local", member, name, ns)
	startPut(t, elsewhere, "before-auth", host)
	if msg := waitProbe(t, elsewhere, "before-auth", corev1.PodFailed); strings.Contains(msg, "permission denied") {
		t.Fatalf("the write before auth reached etcd: %q; want no connection", msg)
	}

	s := getSecret(t, ns, "operator")
	s.Data = ca.SecretData(t, operator)
	if err := k8s.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "authentication enabled", func() error {
		if !getCluster(t, ns, name).Status.AuthEnabled {
			return fmt.Errorf("status.authEnabled is false")
		}
		return nil
	})
	// The policy that kept clients out is gone; etcd itself refuses now.
	startPut(t, elsewhere, "after-auth", host)
	if msg := waitProbe(t, elsewhere, "after-auth", corev1.PodFailed); !strings.Contains(msg, "permission denied") {
		t.Fatalf("the write without a password after auth: %q; want etcd's permission denied", msg)
	}
}

// waitMembersServing waits until n member Pods of the cluster are Ready and returns one name.
func waitMembersServing(t *testing.T, ns, cluster string, n int) string {
	t.Helper()
	var name string
	eventually(t, 5*time.Minute, fmt.Sprintf("%d member Pods Ready", n), func() error {
		pods := &corev1.PodList{}
		if err := k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{specs.LabelCluster: cluster}); err != nil {
			return err
		}
		ready := 0
		for i := range pods.Items {
			if podIsReady(&pods.Items[i]) {
				ready, name = ready+1, pods.Items[i].Name
			}
		}
		if ready < n {
			return fmt.Errorf("%d of %d Ready", ready, n)
		}
		return nil
	})
	return name
}

// startPut runs etcdctl put, without a user, through host's client port in a Pod of its own
// presenting the certificate of Secret app (its namespace's): whether the Pod succeeds says
// whether the write was taken, its message why not. It is never restarted.
func startPut(t *testing.T, ns, name, host string) {
	t.Helper()
	const dir = "/etc/app-tls"
	create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Volumes:       []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "app"}}}},
		Containers: []corev1.Container{{Name: "etcdctl", Image: "quay.io/coreos/etcd:v" + etcdVersion,
			Command: []string{"/usr/local/bin/etcdctl", "--endpoints=https://" + host + ":2379",
				"--cacert=" + dir + "/ca.crt", "--cert=" + dir + "/tls.crt", "--key=" + dir + "/tls.key",
				"--dial-timeout=10s", "--command-timeout=15s", "put", "written-by", name},
			VolumeMounts:             []corev1.VolumeMount{{Name: "tls", MountPath: dir, ReadOnly: true}},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}}}})
}
