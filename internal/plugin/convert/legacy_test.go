package convert

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// legacyFull is the legacy operator's "full" example shape, with TLS and auth added.
const legacyFull = `apiVersion: etcd.aenix.io/v1alpha1
kind: EtcdCluster
metadata:
  name: test
  namespace: default
spec:
  replicas: 3
  options:
    election-timeout: "1000"
    quota-backend-bytes: "4294967296"
    auto-compaction-mode: periodic
    auto-compaction-retention: "1h"
  storage:
    volumeClaimTemplate:
      spec:
        storageClassName: gp3
        accessModes: [ "ReadWriteOnce" ]
        resources:
          requests:
            storage: 10Gi
  podTemplate:
    metadata:
      labels:
        env: prod
    spec:
      imagePullSecrets:
      - name: myregistrykey
      priorityClassName: "low"
      containers:
      - name: etcd
        image: "quay.io/coreos/etcd:v3.5.12"
        resources:
          requests:
            cpu: 100m
  podDisruptionBudgetTemplate:
    spec:
      minAvailable: 2
  security:
    enableAuth: true
    tls:
      serverSecret: test-server
      serverTrustedCASecret: test-ca
      clientSecret: test-client
      peerSecret: test-peer
`

func TestLegacyTranslation(t *testing.T) {
	results, err := Manifests(strings.NewReader(legacyFull))
	if err != nil || len(results) != 1 {
		t.Fatalf("%v %v", results, err)
	}
	c := results[0].Cluster
	replicas, size, class, quota := int32(3), resource.MustParse("10Gi"), "gp3", resource.MustParse("4294967296")
	want := etcdv1.EtcdClusterSpec{
		Replicas: &replicas, Version: "3.5.12",
		Storage:            etcdv1.StorageSpec{Size: &size, StorageClassName: &class},
		Options:            &etcdv1.EtcdOptions{QuotaBackendBytes: &quota, AutoCompactionMode: etcdv1.AutoCompactionPeriodic, AutoCompactionRetention: "1h"},
		Resources:          corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "myregistrykey"}},
		AdditionalMetadata: &etcdv1.AdditionalMetadata{Labels: map[string]string{"env": "prod"}},
		TLS: &etcdv1.EtcdClusterTLS{
			Client: &etcdv1.ClientTLS{ServerSecretRef: &corev1.LocalObjectReference{Name: "test-server"}, OperatorClientSecretRef: &corev1.LocalObjectReference{Name: "test-client"}},
			Peer:   &etcdv1.PeerTLS{SecretRef: &corev1.LocalObjectReference{Name: "test-peer"}},
		},
		Auth: &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "test-root"}},
	}
	if !equality.Semantic.DeepEqual(c.Spec, want) {
		t.Errorf("translated spec\n got %+v\nwant %+v", c.Spec, want)
	}
	notes := strings.Join(results[0].Notes, "\n")
	for _, want := range []string{"election-timeout=1000", "podDisruptionBudgetTemplate", "serverTrustedCASecret test-ca", "Secret test-root",
		"priorityClassName", "connect to test-client", "spec.version 3.5.12: etcd does not write a learner's promotion", "until every member runs 3.5.20"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

func TestLegacyStorageTable(t *testing.T) {
	for _, tc := range []struct {
		name, storage string
		medium        etcdv1.StorageMedium
		size, note    string
	}{
		{"memory", "emptyDir: {medium: Memory, sizeLimit: 512Mi}", etcdv1.StorageMediumMemory, "512Mi", ""},
		{"disk emptyDir", "emptyDir: {sizeLimit: 1Gi}", "", "", "emptyDir on disk has no counterpart"},
		{"claim", "volumeClaimTemplate: {spec: {resources: {requests: {storage: 2Gi}}}}", "", "2Gi", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Manifests(strings.NewReader("apiVersion: etcd.aenix.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: x}\nspec:\n  storage: {" + tc.storage + "}\n"))
			if err != nil {
				t.Fatal(err)
			}
			st := res[0].Cluster.Spec.Storage
			gotSize := ""
			if st.Size != nil {
				gotSize = st.Size.String()
			}
			notes := strings.Join(res[0].Notes, "\n")
			if st.Medium != tc.medium || gotSize != tc.size || (tc.note != "" && !strings.Contains(notes, tc.note)) {
				t.Errorf("storage %+v size %q notes %q", st, gotSize, notes)
			}
			if res[0].Cluster.Spec.Version != legacyDefaultVersion {
				t.Errorf("version without an image = %q, want the legacy default %s", res[0].Cluster.Spec.Version, legacyDefaultVersion)
			}
		})
	}
}

func TestLegacyAuthWithoutTLSIsReported(t *testing.T) {
	res, err := Manifests(strings.NewReader("apiVersion: etcd.aenix.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: x}\nspec:\n  security: {enableAuth: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(res[0].Notes, "\n"), "refuses auth over plaintext") {
		t.Errorf("notes %v", res[0].Notes)
	}
}
