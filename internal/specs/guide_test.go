package specs

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// The official etcd operator's deployment guide checks a cluster with
//
//	ETCD_POD=$(kubectl get pods -l controller=NAME -o jsonpath='{.items[0].metadata.name}')
//	kubectl exec $ETCD_POD -- etcdctl --cacert=/etc/etcd/certs/server/ca.crt \
//	  --cert=/etc/etcd/certs/server/tls.crt --key=/etc/etcd/certs/server/tls.key ...
//
// so a member Pod carries controller=<cluster> and has the server Secret at that path too,
// read-only, from the very volume etcd reads at /etc/etcd/tls/server.
func TestMemberPodsAnswerTheGuidesCommands(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tls       *etcdv1.EtcdClusterTLS
		memberTLS *etcdv1.MemberTLS
		mounted   bool
	}{
		{"cert-manager", &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: etcdv1.IssuerReference{Name: "ca"}}}},
			&etcdv1.MemberTLS{ServerSecretName: "db-server-tls"}, true},
		{"own Secret", &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{ServerSecretRef: &corev1.LocalObjectReference{Name: "srv"}}},
			&etcdv1.MemberTLS{ServerSecretName: "srv"}, true},
		{"peer TLS only", &etcdv1.EtcdClusterTLS{Peer: &etcdv1.PeerTLS{SecretRef: &corev1.LocalObjectReference{Name: "peer"}}},
			&etcdv1.MemberTLS{PeerSecretName: "peer"}, false},
		{"plaintext", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(func(c *etcdv1.EtcdCluster) {
				c.Spec.TLS = tc.tls
				// The user's labels do not take the guide's label over.
				c.Spec.AdditionalMetadata = &etcdv1.AdditionalMetadata{Labels: map[string]string{etcdv1.LabelGuideController: "mine", "team": "a"}}
			})
			m := member(c, "db-1")
			m.Spec.TLS = tc.memberTLS
			pod := Pod(c, m, PodOptions{})
			if got := pod.Labels[etcdv1.LabelGuideController]; got != "db" || pod.Labels["team"] != "a" {
				t.Errorf("labels %v: want controller=db beside the user's team=a", pod.Labels)
			}
			if _, ok := pod.Labels["app"]; ok {
				t.Error("the Pod carries app=: a StatefulSet of the official operator (selector app and controller) could count it as its own")
			}
			checkGuideMount(t, pod, tc.mounted)
		})
	}
}

// checkGuideMount: with client TLS (mounted), the guide's path is the server Secret's volume
// etcd reads, whole and read-only, and no volume of its own; without, it is not there.
func checkGuideMount(t *testing.T, pod *corev1.Pod, mounted bool) {
	t.Helper()
	mounts := map[string]corev1.VolumeMount{}
	for _, vm := range pod.Spec.Containers[0].VolumeMounts {
		mounts[vm.MountPath] = vm
	}
	guide, ok := mounts[GuideServerTLSDir]
	if !mounted {
		if ok {
			t.Errorf("%s is mounted without client TLS", GuideServerTLSDir)
		}
		return
	}
	etcd, etcdOK := mounts[serverTLSDir]
	if !ok || !etcdOK {
		t.Fatalf("mounts %v: want the server Secret at %s and %s", pod.Spec.Containers[0].VolumeMounts, serverTLSDir, GuideServerTLSDir)
	}
	if guide.Name != etcd.Name || !guide.ReadOnly || guide.SubPath != "" {
		t.Errorf("%s mounts %+v; want the volume %q etcd reads, whole and read-only", GuideServerTLSDir, guide, etcd.Name)
	}
	if len(pod.Spec.Volumes) != 2 {
		t.Errorf("%d volumes: the guide's path must reuse the server Secret's volume, not add one", len(pod.Spec.Volumes))
	}
}

// The guide takes the first Pod `-l controller=NAME` selects as a member, so no other Pod the
// operator makes for a cluster (snapshot, delete and verify agents) carries the label.
func TestOnlyMemberPodsCarryTheGuidesLabel(t *testing.T) {
	c := cluster()
	s := &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "prod", UID: "u1"},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "db"}, Destination: etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{
			Endpoint: "https://s3.example", Bucket: "b", Key: "etcd/", CredentialsSecretRef: corev1.LocalObjectReference{Name: "creds"}}}}}
	for name, labels := range map[string]map[string]string{
		"snapshot Job":     SnapshotJob(s, c, "op:1", ActionSnapshot).Spec.Template.Labels,
		"delete Job":       SnapshotJob(s, nil, "op:1", ActionDelete).Spec.Template.Labels,
		"verify Job":       VerifyJob(c, s, etcdv1.MemberRestore{Source: s.Spec.Destination}, "op:1").Spec.Template.Labels,
		"cluster's labels": ClusterLabels("db"),
		"member's labels":  MemberLabels("db", "db-1"),
	} {
		if _, ok := labels[etcdv1.LabelGuideController]; ok {
			t.Errorf("the %s carry %s=: the guide's commands could pick it as a member", name, etcdv1.LabelGuideController)
		}
	}
}
