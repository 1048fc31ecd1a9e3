package convert

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// LegacyAPIVersion is the API of the StatefulSet-based operator (aenix-io/etcd-operator).
const LegacyAPIVersion = "etcd.aenix.io/v1alpha1"

// legacyDefaultVersion is the etcd the legacy operator ran when its Pod template named no image.
const legacyDefaultVersion = "3.5.12"

type legacySource struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Replicas    *int32            `json:"replicas"`
		Options     map[string]string `json:"options"`
		PodTemplate struct {
			Metadata struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec corev1.PodSpec `json:"spec"`
		} `json:"podTemplate"`
		Storage struct {
			EmptyDir            *corev1.EmptyDirVolumeSource `json:"emptyDir"`
			VolumeClaimTemplate struct {
				Spec corev1.PersistentVolumeClaimSpec `json:"spec"`
			} `json:"volumeClaimTemplate"`
		} `json:"storage"`
		Security *struct {
			TLS struct {
				PeerTrustedCASecret   string `json:"peerTrustedCASecret"`
				PeerSecret            string `json:"peerSecret"`
				ServerTrustedCASecret string `json:"serverTrustedCASecret"`
				ServerSecret          string `json:"serverSecret"`
				ClientTrustedCASecret string `json:"clientTrustedCASecret"`
				ClientSecret          string `json:"clientSecret"`
			} `json:"tls"`
			EnableAuth bool `json:"enableAuth"`
		} `json:"security"`
		ServiceTemplate             any `json:"serviceTemplate"`
		HeadlessServiceTemplate     any `json:"headlessServiceTemplate"`
		PodDisruptionBudgetTemplate any `json:"podDisruptionBudgetTemplate"`
	} `json:"spec"`
}

// Legacy translates an etcd.aenix.io/v1alpha1 EtcdCluster: replicas, the options map to typed
// options, the etcd container's image, resources and scheduling, storage, TLS Secrets and
// auth. Everything else is reported.
func Legacy(raw map[string]any) (Result, error) {
	data, err := yaml.Marshal(raw)
	if err != nil {
		return Result{}, err
	}
	var src legacySource
	if err := yaml.Unmarshal(data, &src); err != nil {
		return Result{}, fmt.Errorf("not an EtcdCluster of %s: %w", LegacyAPIVersion, err)
	}
	c := newCluster(src.Metadata)
	c.Spec.Replicas = src.Spec.Replicas
	var notes []string
	notes = append(notes, legacyOptions(c, src.Spec.Options)...)
	notes = append(notes, legacyPod(c, &src)...)
	notes = append(notes, legacyStorage(c, &src)...)
	notes = append(notes, legacySecurity(c, &src)...)
	for field, v := range map[string]any{"serviceTemplate": src.Spec.ServiceTemplate, "headlessServiceTemplate": src.Spec.HeadlessServiceTemplate,
		"podDisruptionBudgetTemplate": src.Spec.PodDisruptionBudgetTemplate} {
		if !isEmpty(v) {
			notes = append(notes, fmt.Sprintf("spec.%s has no counterpart: the operator owns its Services and PodDisruptionBudget (spec.additionalMetadata adds labels and annotations)", field))
		}
	}
	notes = append(notes, fmt.Sprintf("clients: the legacy client Service %[1]s becomes the headless Service of the members; connect to %[1]s-client instead", c.Name))
	sort.Strings(notes)
	return Result{Cluster: c, Notes: notes}, nil
}

func newCluster(md metav1.ObjectMeta) *etcdv1.EtcdCluster {
	c := &etcdv1.EtcdCluster{}
	c.APIVersion, c.Kind = etcdv1.GroupVersion.String(), "EtcdCluster"
	c.Name, c.Namespace, c.Labels, c.Annotations = md.Name, md.Namespace, md.Labels, md.Annotations
	return c
}

func isEmpty(v any) bool {
	m, ok := v.(map[string]any)
	return v == nil || ok && len(m) == 0
}

// legacyOptions maps the free-form options map (etcd flags without the dashes).
func legacyOptions(c *etcdv1.EtcdCluster, options map[string]string) []string {
	keys := make([]string, 0, len(options))
	for k := range options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	flags := make([]string, 0, len(keys))
	for _, k := range keys {
		flags = append(flags, "--"+k+"="+options[k])
	}
	opts, rest := Options(flags)
	c.Spec.Options = opts
	notes := make([]string, 0, len(rest))
	for _, f := range rest {
		notes = append(notes, fmt.Sprintf("spec.options %s has no counterpart among the typed spec.options; dropped", strings.TrimPrefix(f, "--")))
	}
	return notes
}

// legacyPod takes the etcd container's image (as the version), resources and the Pod's
// scheduling and metadata.
func legacyPod(c *etcdv1.EtcdCluster, src *legacySource) []string {
	pt := &src.Spec.PodTemplate
	var notes []string
	c.Spec.Version = legacyDefaultVersion
	for _, ctr := range pt.Spec.Containers {
		if ctr.Name != "etcd" {
			notes = append(notes, fmt.Sprintf("spec.podTemplate container %s has no counterpart; dropped", ctr.Name))
			continue
		}
		if ctr.Image != "" {
			tag := ctr.Image[strings.LastIndex(ctr.Image, ":")+1:]
			v, note := Version(tag)
			c.Spec.Version = v
			if note != "" {
				notes = append(notes, note)
			}
			if repo := strings.TrimSuffix(ctr.Image, ":"+tag); repo != "quay.io/coreos/etcd" {
				notes = append(notes, fmt.Sprintf("image repository %s: the operator's --etcd-image-repository flag sets it for all clusters", repo))
			}
		}
		c.Spec.Resources = ctr.Resources
	}
	notes = append(notes, KnownIssues(c.Spec.Version)...)
	c.Spec.Affinity = pt.Spec.Affinity
	c.Spec.TopologySpreadConstraints = pt.Spec.TopologySpreadConstraints
	c.Spec.ImagePullSecrets = pt.Spec.ImagePullSecrets
	if len(pt.Metadata.Labels) > 0 || len(pt.Metadata.Annotations) > 0 {
		c.Spec.AdditionalMetadata = &etcdv1.AdditionalMetadata{Labels: pt.Metadata.Labels, Annotations: pt.Metadata.Annotations}
	}
	if dropsScheduling(pt.Spec) {
		notes = append(notes, "spec.podTemplate nodeSelector, tolerations, priorityClassName, runtimeClassName and schedulerName have no counterpart yet; dropped")
	}
	return notes
}

func legacyStorage(c *etcdv1.EtcdCluster, src *legacySource) []string {
	st := &src.Spec.Storage
	pvc := st.VolumeClaimTemplate.Spec
	if size, ok := pvc.Resources.Requests[corev1.ResourceStorage]; ok {
		c.Spec.Storage.Size = &size
		c.Spec.Storage.StorageClassName = pvc.StorageClassName
		return nil
	}
	if st.EmptyDir != nil && st.EmptyDir.Medium == corev1.StorageMediumMemory {
		c.Spec.Storage.Medium = etcdv1.StorageMediumMemory
		c.Spec.Storage.Size = st.EmptyDir.SizeLimit
		return nil
	}
	if st.EmptyDir != nil {
		return []string{"spec.storage.emptyDir on disk has no counterpart: members get a PVC (spec.storage.size, default 1Gi), or use medium Memory"}
	}
	return nil
}

// legacySecurity maps the TLS Secrets and auth. The legacy operator kept CAs in their own
// Secrets; here each Secret carries its ca.crt.
func legacySecurity(c *etcdv1.EtcdCluster, src *legacySource) []string {
	sec := src.Spec.Security
	if sec == nil {
		return nil
	}
	var notes []string
	t := sec.TLS
	if t.ServerSecret != "" {
		client := &etcdv1.ClientTLS{ServerSecretRef: &corev1.LocalObjectReference{Name: t.ServerSecret}}
		if t.ClientSecret != "" {
			client.OperatorClientSecretRef = &corev1.LocalObjectReference{Name: t.ClientSecret}
		}
		c.Spec.TLS = &etcdv1.EtcdClusterTLS{Client: client}
	}
	if t.PeerSecret != "" {
		if c.Spec.TLS == nil {
			c.Spec.TLS = &etcdv1.EtcdClusterTLS{}
		}
		c.Spec.TLS.Peer = &etcdv1.PeerTLS{SecretRef: &corev1.LocalObjectReference{Name: t.PeerSecret}}
	}
	for field, name := range map[string]string{"serverTrustedCASecret": t.ServerTrustedCASecret, "peerTrustedCASecret": t.PeerTrustedCASecret, "clientTrustedCASecret": t.ClientTrustedCASecret} {
		if name != "" {
			notes = append(notes, fmt.Sprintf("spec.security.tls.%s %s: put its CA into the ca.crt key of the server and peer Secrets, which is where this operator reads it", field, name))
		}
	}
	if sec.EnableAuth {
		if c.Spec.TLS == nil || c.Spec.TLS.Client == nil {
			notes = append(notes, "spec.security.enableAuth without client TLS: this operator refuses auth over plaintext; add spec.tls.client")
		}
		c.Spec.Auth = &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: c.Name + "-root"}}
		notes = append(notes, fmt.Sprintf("auth: create the Secret %s-root with a key password; root gets that password (the legacy root had none)", c.Name))
	}
	return notes
}

// dropsScheduling is true when the Pod template sets scheduling fields that have no
// counterpart in EtcdClusterSpec.
func dropsScheduling(s corev1.PodSpec) bool {
	return len(s.NodeSelector) > 0 || len(s.Tolerations) > 0 || s.PriorityClassName != "" || s.RuntimeClassName != nil || s.SchedulerName != ""
}
