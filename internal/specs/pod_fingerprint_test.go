package specs

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestSchedulingFieldsReachTheMemberPod(t *testing.T) {
	toleration := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "etcd", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name  string
		edit  func(*etcdv1.EtcdCluster)
		check func(*testing.T, corev1.PodSpec)
	}{
		{"none set leaves the scheduler's defaults", func(*etcdv1.EtcdCluster) {}, func(t *testing.T, s corev1.PodSpec) {
			if s.Tolerations != nil || s.NodeSelector != nil || s.PriorityClassName != "" {
				t.Errorf("tolerations %v, nodeSelector %v, priorityClassName %q: want none", s.Tolerations, s.NodeSelector, s.PriorityClassName)
			}
		}},
		{"tolerations", func(c *etcdv1.EtcdCluster) { c.Spec.Tolerations = []corev1.Toleration{toleration} }, func(t *testing.T, s corev1.PodSpec) {
			if !reflect.DeepEqual(s.Tolerations, []corev1.Toleration{toleration}) {
				t.Errorf("tolerations = %v", s.Tolerations)
			}
		}},
		{"nodeSelector", func(c *etcdv1.EtcdCluster) { c.Spec.NodeSelector = map[string]string{"disk": "ssd"} }, func(t *testing.T, s corev1.PodSpec) {
			if s.NodeSelector["disk"] != "ssd" || len(s.NodeSelector) != 1 {
				t.Errorf("nodeSelector = %v", s.NodeSelector)
			}
		}},
		{"priorityClassName", func(c *etcdv1.EtcdCluster) { c.Spec.PriorityClassName = "system-cluster-critical" }, func(t *testing.T, s corev1.PodSpec) {
			if s.PriorityClassName != "system-cluster-critical" {
				t.Errorf("priorityClassName = %q", s.PriorityClassName)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster(tt.edit)
			pod := Pod(c, member(c, "db-1"), PodOptions{})
			tt.check(t, pod.Spec)
			if c.Spec.NodeSelector != nil {
				pod.Spec.NodeSelector["disk"] = "changed"
				if c.Spec.NodeSelector["disk"] != "ssd" {
					t.Error("the Pod shares its nodeSelector map with the cluster's spec")
				}
			}
		})
	}
}

func hashOf(c *etcdv1.EtcdCluster, opts PodOptions) string {
	return Pod(c, member(c, "db-1"), opts).Annotations[etcdv1.AnnotationPodTemplateHash]
}

// An operator upgrade or a changed image repository must not roll members; a user's change
// that reaches the Pod must.
func TestPodFingerprintCoversWhatTheUserDecides(t *testing.T) {
	base := hashOf(cluster(), PodOptions{})
	if got := hashOf(cluster(), PodOptions{ImageRepository: "mirror.example/etcd"}); got != base {
		t.Error("a changed --etcd-image-repository changes the fingerprint: every member would roll")
	}
	unchanged := map[string]func(*etcdv1.EtcdCluster){
		"replicas":                func(c *etcdv1.EtcdCluster) { c.Spec.Replicas = ptr(int32(5)) },
		"progressDeadlineSeconds": func(c *etcdv1.EtcdCluster) { c.Spec.ProgressDeadlineSeconds = ptr(int32(60)) },
	}
	for name, edit := range unchanged {
		if hashOf(cluster(edit), PodOptions{}) != base {
			t.Errorf("changing %s changes the fingerprint: it does not reach the Pod", name)
		}
	}
	// Keyed by podInputs' field names: every cluster field of podInputs has an edit here, so
	// one listed there but left out of templateHash fails.
	changed := map[string]func(*etcdv1.EtcdCluster){
		"Resources": func(c *etcdv1.EtcdCluster) {
			c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		},
		"Options": func(c *etcdv1.EtcdCluster) { c.Spec.Options = &etcdv1.EtcdOptions{AutoCompactionRetention: "1h"} },
		"AdditionalMetadata": func(c *etcdv1.EtcdCluster) {
			c.Spec.AdditionalMetadata = &etcdv1.AdditionalMetadata{Labels: map[string]string{"a": "b"}}
		},
		"Tolerations": func(c *etcdv1.EtcdCluster) {
			c.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
		},
		"NodeSelector":      func(c *etcdv1.EtcdCluster) { c.Spec.NodeSelector = map[string]string{"disk": "ssd"} },
		"PriorityClassName": func(c *etcdv1.EtcdCluster) { c.Spec.PriorityClassName = "high" },
		"ImagePullSecrets":  func(c *etcdv1.EtcdCluster) { c.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "r"}} },
		"Affinity":          func(c *etcdv1.EtcdCluster) { c.Spec.Affinity = &corev1.Affinity{} },
		"TopologySpreadConstraints": func(c *etcdv1.EtcdCluster) {
			c.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone"}}
		},
		"TLS": func(c *etcdv1.EtcdCluster) {
			c.Spec.TLS = &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{ServerSecretRef: &corev1.LocalObjectReference{Name: "s"}}}
		},
		"Auth": func(c *etcdv1.EtcdCluster) { c.Spec.Auth = &etcdv1.AuthSpec{Enabled: true} },
		"RestartedAt": func(c *etcdv1.EtcdCluster) {
			c.Annotations = map[string]string{etcdv1.AnnotationRestartedAt: "2026-01-02T03:04:05Z"}
		},
	}
	for name, edit := range changed {
		if hashOf(cluster(edit), PodOptions{}) == base {
			t.Errorf("changing %s leaves the fingerprint alone: running members would never get it", name)
		}
	}
	for f := range reflect.TypeFor[podInputs]().Fields() {
		if _, ok := changed[f.Name]; !ok && f.Name != "Format" && f.Name != "Member" {
			t.Errorf("podInputs.%s has no edit in this test's changed list: nothing checks that templateHash covers it", f.Name)
		}
	}
	c := cluster()
	m := member(c, "db-1")
	m.Spec.Version = "3.6.17"
	if Pod(c, m, PodOptions{}).Annotations[etcdv1.AnnotationPodTemplateHash] == base {
		t.Error("a member's new version leaves the fingerprint alone")
	}
	m = member(c, "db-1")
	grown := resource.MustParse("20Gi")
	m.Spec.Storage.Size = &grown
	if Pod(c, m, PodOptions{}).Annotations[etcdv1.AnnotationPodTemplateHash] != base {
		t.Error("a grown PVC changes the fingerprint: every member would restart for a volume that grows in place")
	}
	tmpfs := cluster(func(c *etcdv1.EtcdCluster) { c.Spec.Storage.Medium = etcdv1.StorageMediumMemory })
	m = member(tmpfs, "db-1")
	tmpfsBase := Pod(tmpfs, m, PodOptions{}).Annotations[etcdv1.AnnotationPodTemplateHash]
	m.Spec.Storage.Size = &grown
	if Pod(tmpfs, m, PodOptions{}).Annotations[etcdv1.AnnotationPodTemplateHash] == tmpfsBase {
		t.Error("a larger tmpfs size leaves the fingerprint alone: the Pod's size limit would never grow")
	}
	m = member(c, "db-1")
	m.Spec.Dormant = true
	if Pod(c, m, PodOptions{}).Annotations[etcdv1.AnnotationPodTemplateHash] != base {
		t.Error("waking a dormant member counts as a change")
	}
}

// A field added to EtcdClusterSpec must be sorted: into podInputs (it reaches the Pod, so a
// change must roll members) or into notInPod (it does not). Without this, a new field that
// reaches the Pod would never reach running members.
func TestEveryClusterSpecFieldIsClassified(t *testing.T) {
	notInPod := map[string]bool{
		"Replicas": true, "ProgressDeadlineSeconds": true,
		"Bootstrap": true, // consulted once, at the first bootstrap, by the controller
		"Storage":   true, // reaches the Pod through the EtcdMember's spec.storage
		"Version":   true, // reaches the Pod through the EtcdMember's spec.version
		// What becomes of the PVCs when the cluster is deleted: PVC owner references only.
		"PersistentVolumeClaimRetentionPolicy": true,
		"NetworkPolicy":                        true, // an object of its own beside the Pods
		"Defrag":                               true, // a schedule the operator runs through etcd's API
		"Alarms":                               true, // how the operator answers an alarm, through etcd's API
		"QuorumLoss":                           true, // whether the operator recovers a lost quorum: annotations and EtcdMembers
		"NodeLoss":                             true, // when the operator replaces a member whose node is gone: EtcdMembers
	}
	inputs := map[string]bool{}
	for f := range reflect.TypeFor[podInputs]().Fields() {
		inputs[f.Name] = true
	}
	for f := range reflect.TypeFor[etcdv1.EtcdClusterSpec]().Fields() {
		if !inputs[f.Name] && !notInPod[f.Name] {
			t.Errorf("EtcdClusterSpec.%s is neither in podInputs nor known not to reach the Pod: if it reaches member Pods, "+
				"add it to podInputs and templateHash in internal/specs/pod.go (a change then rolls members); if not, add it "+
				"to notInPod in this test with a comment saying why", f.Name)
		}
	}
}

func TestQuotaDefaultsToHalfTheVolume(t *testing.T) {
	tests := []struct {
		size, quota string
		want        string
	}{
		{"1Gi", "", "--quota-backend-bytes=536870912"},
		{"4Gi", "", "--quota-backend-bytes=2147483648"},
		{"100Gi", "", "--quota-backend-bytes=8589934592"},
		{"1Gi", "300Mi", "--quota-backend-bytes=314572800"},
	}
	for _, tt := range tests {
		c := cluster(func(c *etcdv1.EtcdCluster) {
			size := resource.MustParse(tt.size)
			c.Spec.Storage.Size = &size
			if tt.quota != "" {
				c.Spec.Options = &etcdv1.EtcdOptions{QuotaBackendBytes: ptr(resource.MustParse(tt.quota))}
			}
		})
		var quotas []string
		for _, a := range EtcdArgs(c, member(c, "db-1")) {
			if strings.HasPrefix(a, "--quota-backend-bytes=") {
				quotas = append(quotas, a)
			}
		}
		if len(quotas) != 1 || quotas[0] != tt.want {
			t.Errorf("size %s, quota %q: %v, want [%s]", tt.size, tt.quota, quotas, tt.want)
		}
	}
}

// `kubectl etcd restart` rolls every member by a new AnnotationRestartedAt; a cluster without
// it keeps the fingerprint its Pods were built with before the annotation existed (this value,
// from that release), so that upgrading the operator restarts no member.
func TestRestartedAtRollsOnlyWhenSet(t *testing.T) {
	if got := hashOf(cluster(), PodOptions{}); got != "cef772965b74b334" {
		t.Errorf("fingerprint of a cluster never restarted = %s; it changed, so an operator upgrade would roll every member", got)
	}
	at := func(v string) func(*etcdv1.EtcdCluster) {
		return func(c *etcdv1.EtcdCluster) { c.Annotations = map[string]string{etcdv1.AnnotationRestartedAt: v} }
	}
	first, second := hashOf(cluster(at("2026-01-02T03:04:05Z")), PodOptions{}), hashOf(cluster(at("2026-01-02T03:09:00Z")), PodOptions{})
	if first == second {
		t.Error("a second restart leaves the fingerprint of the first: it would restart nothing")
	}
}

// The certificates' lifetime reaches the Certificates only: etcd reads a renewed certificate
// at the next handshake, so changing spec.tls.validityDuration or renewBefore restarts no
// member, and a cluster that sets them keeps the fingerprint of one that does not.
func TestCertificateLifetimeRollsNoMember(t *testing.T) {
	base := hashOf(cluster(certManagerTLS), PodOptions{})
	for name, edit := range map[string]func(*etcdv1.EtcdCluster){
		"validityDuration": func(c *etcdv1.EtcdCluster) { certManagerTLS(c); c.Spec.TLS.ValidityDuration = "87600h" },
		"renewBefore":      func(c *etcdv1.EtcdCluster) { certManagerTLS(c); c.Spec.TLS.RenewBefore = "100h" },
	} {
		if hashOf(cluster(edit), PodOptions{}) != base {
			t.Errorf("setting spec.tls.%s changes the fingerprint: every member would restart for a certificate it reloads anyway", name)
		}
	}
	c := cluster(certManagerTLS)
	c.Spec.TLS.ValidityDuration = "87600h"
	_ = hashOf(c, PodOptions{})
	if c.Spec.TLS.ValidityDuration != "87600h" {
		t.Error("the fingerprint cleared the cluster's own spec.tls.validityDuration")
	}
}
