package specs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcdversion"
)

// Paths inside the etcd container.
const (
	serverTLSDir   = "/etc/etcd/tls/server"
	peerTLSDir     = "/etc/etcd/tls/peer"
	clientCATLSDir = "/etc/etcd/tls/client-ca"
	etcdUser       = 65532 // the "nonroot" user of distroless images, which etcd's are
)

// GuideServerTLSDir is where the official etcd operator's deployment guide has etcdctl read
// the server certificate (--cacert=/etc/etcd/certs/server/ca.crt ...): the same Secret is
// mounted there too, read-only, so that its commands work as written.
const GuideServerTLSDir = "/etc/etcd/certs/server"

// PodOptions are the operator-wide settings a Pod depends on.
type PodOptions struct {
	ImageRepository string
	// AgentImage is the operator's own image, whose restore agent restores a snapshot into a
	// new cluster's first member.
	AgentImage string
}

// Pod is the Pod of a member.
func Pod(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, opts PodOptions) *corev1.Pod {
	repo := opts.ImageRepository
	if repo == "" {
		repo = DefaultImageRepository
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        m.Name,
			Namespace:   m.Namespace,
			Labels:      withMetadata(memberPodLabels(c, m), extraLabels(c)),
			Annotations: withMetadata(nil, extraAnnotations(c)),
		},
		Spec: corev1.PodSpec{
			Hostname:                      m.Name,
			Subdomain:                     MemberSubdomain(c, m.Name),
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr(int64(30)),
			EnableServiceLinks:            ptr(false),
			ServiceAccountName:            restoreServiceAccount(c, m),
			AutomountServiceAccountToken:  ptr(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr(true),
				RunAsUser:      ptr(int64(etcdUser)),
				RunAsGroup:     ptr(int64(etcdUser)),
				FSGroup:        ptr(int64(etcdUser)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers:            restoreInitContainers(c, m, Image(repo, m.Spec.Version), opts.AgentImage),
			Containers:                []corev1.Container{etcdContainer(c, m, Image(repo, m.Spec.Version))},
			Volumes:                   append(volumes(m), restoreVolumes(c, m)...),
			Affinity:                  c.Spec.Affinity.DeepCopy(),
			TopologySpreadConstraints: spreadConstraints(c),
			ImagePullSecrets:          append([]corev1.LocalObjectReference(nil), c.Spec.ImagePullSecrets...),
			Tolerations:               append([]corev1.Toleration(nil), c.Spec.Tolerations...),
			NodeSelector:              copyMap(c.Spec.NodeSelector),
			PriorityClassName:         c.Spec.PriorityClassName,
		},
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[etcdv1.AnnotationPodTemplateHash] = templateHash(c, m)
	pod.Annotations[etcdv1.AnnotationInitialCluster] = m.Spec.Bootstrap.InitialCluster
	return pod
}

// memberPodLabels are a member Pod's own labels: the member's, and the official operator's
// `controller: <cluster>` (etcdv1.LabelGuideController) that its guide selects Pods by. Not
// its `app` label: a StatefulSet of the official operator selects app and controller
// together, so it never counts these Pods as its own.
func memberPodLabels(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) map[string]string {
	labels := MemberLabels(c.Name, m.Name)
	labels[etcdv1.LabelGuideController] = c.Name
	return labels
}

func copyMap(in map[string]string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// PodFormat is the version of how this operator builds member Pods out of a spec. Bump it in
// a release whose Pod builder change must reach running members (a new required flag, a fixed
// probe that would otherwise never pass): that release then rolls every member once, and its
// release notes must say so (docs/install.md lists them). Any other change of the builder
// (defaults, the --etcd-image-repository flag) reaches a member at its next restart or roll.
const PodFormat = 1

// podInputs is what a member's Pod depends on that the cluster's owner decides: the fields of
// the EtcdCluster and EtcdMember specs that reach the Pod, and PodFormat. Everything the
// operator itself decides stays out, so that upgrading the operator does not restart every
// member of every cluster. TestEveryClusterSpecFieldIsClassified fails when a new spec field
// is not sorted into these inputs or out of them.
type podInputs struct {
	Format                    int
	Member                    etcdv1.EtcdMemberSpec
	TLS                       *etcdv1.EtcdClusterTLS
	Auth                      *etcdv1.AuthSpec
	Resources                 corev1.ResourceRequirements
	AdditionalMetadata        *etcdv1.AdditionalMetadata
	Affinity                  *corev1.Affinity
	TopologySpreadConstraints []corev1.TopologySpreadConstraint
	Options                   *etcdv1.EtcdOptions
	ImagePullSecrets          []corev1.LocalObjectReference
	Tolerations               []corev1.Toleration
	NodeSelector              map[string]string
	PriorityClassName         string
	// RestartedAt is the cluster's AnnotationRestartedAt: a new value rolls every member.
	// Left out when empty, so that a cluster never restarted keeps the fingerprint it had
	// before the field existed and an operator upgrade rolls nothing.
	RestartedAt string `json:",omitempty"`
}

// templateHash fingerprints a member's podInputs. encoding/json writes map keys in order, so
// equal inputs hash alike.
func templateHash(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) string {
	member := *m.Spec.DeepCopy()
	member.Dormant = false // a dormant member has no Pod; waking it must not count as a change
	if member.Storage.Medium != etcdv1.StorageMediumMemory {
		// A PVC grows in place: restarting every member for it would only raise the default
		// quota (half the volume), which the member's next restart picks up anyway. A tmpfs
		// size limit is the Pod's own, so there a larger size must roll.
		member.Storage.Size = nil
	}
	s := &c.Spec
	data, err := json.Marshal(podInputs{
		Format: PodFormat, Member: member, TLS: podTLS(c), Auth: s.Auth, Resources: s.Resources,
		AdditionalMetadata: s.AdditionalMetadata, Affinity: s.Affinity,
		TopologySpreadConstraints: s.TopologySpreadConstraints, Options: s.Options,
		ImagePullSecrets: s.ImagePullSecrets, Tolerations: s.Tolerations,
		NodeSelector: s.NodeSelector, PriorityClassName: s.PriorityClassName,
		RestartedAt: c.Annotations[etcdv1.AnnotationRestartedAt],
	})
	if err != nil {
		panic(fmt.Sprintf("pod inputs always marshal: %v", err))
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// podTLS is spec.tls as far as it reaches a Pod: the certificates' lifetime
// (validityDuration, renewBefore) reaches only the cert-manager Certificates, and a renewed
// certificate is read by etcd without a restart, so changing it rolls no member.
func podTLS(c *etcdv1.EtcdCluster) *etcdv1.EtcdClusterTLS {
	t := c.Spec.TLS
	if t == nil {
		return nil
	}
	out := t.DeepCopy()
	out.ValidityDuration, out.RenewBefore = "", ""
	podIssuerTLS(c, out)
	return out
}

func ptr[T any](v T) *T { return &v }

func etcdContainer(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, image string) corev1.Container {
	probes := probesFor(m.Spec.Version)
	return corev1.Container{
		Name:    ContainerName,
		Image:   image,
		Command: []string{"/usr/local/bin/etcd"},
		Args:    EtcdArgs(c, m),
		// No ETCDCTL_* variables: etcdctl refuses to run when a variable and the matching
		// flag are both set, and people type the flags (see docs/tls.md).
		Env: []corev1.EnvVar{initialClusterEnvVar()},
		Ports: []corev1.ContainerPort{
			{Name: "client", ContainerPort: ClientPort},
			{Name: "peer", ContainerPort: PeerPort},
			{Name: "metrics", ContainerPort: MetricsPort},
		},
		Resources:      resources(c),
		VolumeMounts:   volumeMounts(c, m),
		StartupProbe:   probes.startup,
		LivenessProbe:  probes.liveness,
		ReadinessProbe: probes.readiness,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false),
			ReadOnlyRootFilesystem:   ptr(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// etcdProbes are the etcd container's startup, liveness and readiness probes.
type etcdProbes struct{ startup, liveness, readiness *corev1.Probe }

// probesFor picks the probes etcd's version serves. etcd's health endpoints live on the
// plaintext metrics port, so probes never need client certificates. From 3.5.11
// (etcdversion.HasLivezReadyz): /livez needs no quorum, so a member waiting for its peers at
// bootstrap or after a pause is not killed; /readyz does. Before 3.5.11 etcd serves neither
// (a 404) and only /health, which needs a leader and a quorum read and fails on an alarm: it
// is the readiness probe there, and startup and liveness are whether the metrics port takes a
// connection (etcd opens it before it joins its peers), so that waiting for a quorum or an
// alarm never kills the member.
// Startup and readiness are asked every second: a new or restarted member is counted Ready,
// by the Service and by whoever waits on it, within a second of etcd saying so rather than
// two (etcd answers these from memory). Startup still allows 300 s.
func probesFor(version string) etcdProbes {
	if v, ok := etcdversion.Parse(version); ok && !v.HasLivezReadyz() {
		return etcdProbes{
			startup:   tcpProbe(1, 300),
			liveness:  tcpProbe(10, 3),
			readiness: httpProbe("/health", 1, 3),
		}
	}
	return etcdProbes{
		startup:   httpProbe("/livez", 1, 300),
		liveness:  httpProbe("/livez", 10, 3),
		readiness: httpProbe("/readyz", 1, 3),
	}
}

func tcpProbe(period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(MetricsPort)}},
		PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 2,
	}
}

func httpProbe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(MetricsPort), Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 2,
	}
}

// initialClusterEnv is the variable etcd reads for --initial-cluster when the flag is not
// given (a flag would shadow it).
const initialClusterEnv = "ETCD_INITIAL_CLUSTER"

// initialClusterFieldPath points the downward API at AnnotationInitialCluster.
const initialClusterFieldPath = "metadata.annotations['" + etcdv1.AnnotationInitialCluster + "']"

// initialClusterEnvVar gives etcd its initial cluster from the Pod's AnnotationInitialCluster,
// which the kubelet reads afresh at every container start: RequireDataInPlace can change it
// on a running Pod, whose flags cannot change.
func initialClusterEnvVar() corev1.EnvVar {
	return corev1.EnvVar{Name: initialClusterEnv, ValueFrom: &corev1.EnvVarSource{
		// APIVersion as the API server defaults it, so that the built Pod equals the stored one.
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: initialClusterFieldPath},
	}}
}

// EtcdArgs are the flags of a member's etcd. The operator owns names, URLs, data and TLS
// files; spec.options adds the typed settings. The initial cluster is no flag: the container
// reads it from the Pod's annotation (initialClusterEnvVar).
func EtcdArgs(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) []string {
	b := m.Spec.Bootstrap
	args := []string{
		"--name=" + m.Name,
		"--data-dir=" + MemberDataDir(m),
		fmt.Sprintf("--listen-peer-urls=%s://0.0.0.0:%d", scheme(PeerTLS(c)), PeerPort),
		fmt.Sprintf("--listen-client-urls=%s://0.0.0.0:%d", scheme(ClientTLS(c)), ClientPort),
		fmt.Sprintf("--listen-metrics-urls=http://0.0.0.0:%d", MetricsPort),
		"--advertise-client-urls=" + ClientURL(c, m.Name),
		"--initial-advertise-peer-urls=" + PeerURL(c, m.Name),
		"--initial-cluster-state=" + string(b.InitialClusterState),
		"--initial-cluster-token=" + b.ClusterToken,
		"--strict-reconfig-check=true",
	}
	args = append(args, tlsArgs(c, m)...)
	if c.Spec.Options == nil || c.Spec.Options.QuotaBackendBytes == nil {
		args = append(args, "--quota-backend-bytes="+strconv.FormatInt(DefaultQuotaBackendBytes(m.Spec.Storage.Size), 10))
	}
	return append(args, OptionArgs(c.Spec.Options)...)
}

// maxDefaultQuota is etcd's advice for the largest backend: 8 GiB.
const maxDefaultQuota = 8 << 30

// DefaultQuotaBackendBytes is the quota when spec.options.quotaBackendBytes is not set: half
// the member's volume, at most 8 GiB. etcd's own default (2 GiB) is larger than the default
// 1Gi volume, so the disk would fill before the quota: etcd then fails its WAL writes and
// stops, where at the quota it raises the NOSPACE alarm and keeps serving reads and deletes.
// The other half holds the WAL (five 64 MiB files kept by default), snapshots, and the copy
// a defragmentation writes next to the database.
func DefaultQuotaBackendBytes(size *resource.Quantity) int64 {
	volume := int64(1 << 30)
	if size != nil {
		volume = size.Value()
	}
	return min(volume/2, maxDefaultQuota)
}

func tlsArgs(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) []string {
	var args []string
	if ClientTLS(c) {
		trusted := serverTLSDir + "/" + SecretKeyCA
		if clientCASecret(m) != "" {
			trusted = clientCATLSDir + "/" + SecretKeyCA
		}
		if caBundle(m) != "" {
			trusted = caBundleDir + "/" + CABundleKeyClient
		}
		args = append(args,
			"--cert-file="+serverTLSDir+"/tls.crt",
			"--key-file="+serverTLSDir+"/tls.key",
			"--trusted-ca-file="+trusted)
		if ClientCertAuth(c) {
			args = append(args, "--client-cert-auth=true")
		}
	}
	if PeerAutoTLS(c) {
		// Self-signed certificates that peers accept without verifying them (see PeerTLS.AutoTLS).
		args = append(args, "--peer-auto-tls=true")
	} else if PeerSecretTLS(c) {
		args = append(args,
			"--peer-cert-file="+peerTLSDir+"/tls.crt",
			"--peer-key-file="+peerTLSDir+"/tls.key",
			"--peer-trusted-ca-file="+peerTrustedCA(m),
			"--peer-client-cert-auth=true")
		if name := PeerAllowedHostname(c); name != "" {
			args = append(args, "--peer-cert-allowed-hostname="+name)
		}
	}
	return args
}

// peerTrustedCA is the file of CAs the member trusts for peers: the bundle's once the
// cluster's CA was rotated, else the peer Secret's ca.crt.
func peerTrustedCA(m *etcdv1.EtcdMember) string {
	if caBundle(m) != "" {
		return caBundleDir + "/" + CABundleKeyPeer
	}
	return peerTLSDir + "/" + SecretKeyCA
}

// PeerAllowedHostname pins who may talk to a member as a peer: only a certificate valid for
// this cluster's headless Service name, not any certificate the peer CA signed (an issuer
// shared by several clusters signs theirs too). Set for peer certificates the operator asks
// cert-manager for, which carry that name (PeerDNSNames); a peer Secret of the user's own
// (spec.tls.peer.secretRef) may not, so it is not pinned: docs/tls.md says what to put in it.
func PeerAllowedHostname(c *etcdv1.EtcdCluster) string {
	if !PeerTLS(c) || c.Spec.TLS.Peer.CertManager == nil {
		return ""
	}
	return MembersServiceName(c) + "." + c.Namespace + ".svc"
}

// ClientCertAuth is true when etcd requires client certificates (mutual TLS on 2379).
func ClientCertAuth(c *etcdv1.EtcdCluster) bool {
	if !ClientTLS(c) {
		return false
	}
	t := c.Spec.TLS.Client
	return t.OperatorClientSecretRef != nil || (t.CertManager != nil && t.CertManager.OperatorClientIssuerRef != nil)
}

// OptionArgs maps spec.options onto etcd flags.
func OptionArgs(o *etcdv1.EtcdOptions) []string {
	if o == nil {
		return nil
	}
	var args []string
	// 0 is etcd's default quota; leaving the flag out says so plainly.
	if o.QuotaBackendBytes != nil && !o.QuotaBackendBytes.IsZero() {
		args = append(args, "--quota-backend-bytes="+strconv.FormatInt(o.QuotaBackendBytes.Value(), 10))
	}
	if o.AutoCompactionMode != "" {
		args = append(args, "--auto-compaction-mode="+string(o.AutoCompactionMode))
	}
	if o.AutoCompactionRetention != "" {
		args = append(args, "--auto-compaction-retention="+o.AutoCompactionRetention)
	}
	if o.SnapshotCount != nil {
		args = append(args, "--snapshot-count="+strconv.FormatInt(*o.SnapshotCount, 10))
	}
	return args
}

// DefaultResources are the etcd container's requests when spec.resources is empty.
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("256Mi"),
	}}
}

func resources(c *etcdv1.EtcdCluster) corev1.ResourceRequirements {
	return orDefault(c.Spec.Resources, DefaultResources())
}

// clientCASecret is the member's MemberTLS.ClientCASecretName: the member's own record, not
// the cluster's spec, so that a member made before the field existed keeps trusting what it
// trusted (its mounts and flags agree).
func clientCASecret(m *etcdv1.EtcdMember) string {
	if m.Spec.TLS == nil {
		return ""
	}
	return m.Spec.TLS.ClientCASecretName
}

func volumeMounts(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) []corev1.VolumeMount {
	mounts := []corev1.VolumeMount{{Name: "data", MountPath: DataDir}}
	if ClientTLS(c) {
		mounts = append(mounts, corev1.VolumeMount{Name: "server-tls", MountPath: serverTLSDir, ReadOnly: true},
			corev1.VolumeMount{Name: "server-tls", MountPath: GuideServerTLSDir, ReadOnly: true})
		if clientCASecret(m) != "" {
			mounts = append(mounts, corev1.VolumeMount{Name: "client-ca", MountPath: clientCATLSDir, ReadOnly: true})
		}
	}
	if PeerSecretTLS(c) {
		mounts = append(mounts, corev1.VolumeMount{Name: "peer-tls", MountPath: peerTLSDir, ReadOnly: true})
	}
	if caBundle(m) != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: "ca-bundle", MountPath: caBundleDir, ReadOnly: true})
	}
	return mounts
}

func volumes(m *etcdv1.EtcdMember) []corev1.Volume {
	data := corev1.Volume{Name: "data"}
	if m.Spec.Storage.Medium == etcdv1.StorageMediumMemory {
		data.EmptyDir = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: m.Spec.Storage.Size}
	} else {
		data.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: PVCName(m)}
	}
	vols := []corev1.Volume{data}
	if t := m.Spec.TLS; t != nil && t.ServerSecretName != "" {
		vols = append(vols, secretVolume("server-tls", t.ServerSecretName))
	}
	if t := m.Spec.TLS; t != nil && t.PeerSecretName != "" {
		vols = append(vols, secretVolume("peer-tls", t.PeerSecretName))
	}
	if name := clientCASecret(m); name != "" {
		// Only the CA: the Secret is the operator's client certificate, whose key no member
		// needs.
		vols = append(vols, secretVolume("client-ca", name, SecretKeyCA))
	}
	if name := caBundle(m); name != "" {
		// The CAs members trust, not the operator's own (server-ca.crt).
		vols = append(vols, secretVolume("ca-bundle", name, CABundleKeyClient, CABundleKeyPeer))
	}
	return vols
}

// secretVolume mounts a Secret readable by the Pod's group only: the keys named, each under
// its own name, or all of them when none is named.
func secretVolume(name, secret string, keys ...string) corev1.Volume {
	var items []corev1.KeyToPath
	for _, k := range keys {
		items = append(items, corev1.KeyToPath{Key: k, Path: k})
	}
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secret, Items: items, DefaultMode: ptr(int32(0o440)),
	}}}
}

// spreadConstraints passes the user's constraints through, selecting the cluster's Pods
// where the user left the selector empty.
func spreadConstraints(c *etcdv1.EtcdCluster) []corev1.TopologySpreadConstraint {
	out := make([]corev1.TopologySpreadConstraint, 0, len(c.Spec.TopologySpreadConstraints))
	for _, tsc := range c.Spec.TopologySpreadConstraints {
		tsc = *tsc.DeepCopy()
		if tsc.LabelSelector == nil {
			tsc.LabelSelector = &metav1.LabelSelector{MatchLabels: ClusterLabels(c.Name)}
		}
		out = append(out, tsc)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ContainerName is the name of the container that runs etcd in a member's Pod.
const ContainerName = "etcd"

// flagInitialCluster is the flag the Pods of earlier releases gave etcd its initial cluster
// with; Pods built now give it through AnnotationInitialCluster.
const flagInitialCluster = "--initial-cluster="

// flagStateExisting: the member joins a cluster that exists.
const flagStateExisting = "--initial-cluster-state=" + string(etcdv1.InitialClusterStateExisting)

// InitialClusterOf is the initial cluster etcd in a member's Pod starts with: its
// --initial-cluster flag in a Pod an earlier release built (a flag shadows the variable), or
// AnnotationInitialCluster in one built now; "" when it has neither.
func InitialClusterOf(pod *corev1.Pod) string {
	value, _ := initialClusterOf(pod)
	return value
}

// initialClusterOf is InitialClusterOf, and whether it comes from the annotation.
func initialClusterOf(pod *corev1.Pod) (value string, fromAnnotation bool) {
	ctr := etcdContainerOf(pod)
	if ctr == nil {
		return "", false
	}
	for _, arg := range ctr.Args {
		if v, ok := strings.CutPrefix(arg, flagInitialCluster); ok {
			return v, false
		}
	}
	for _, e := range ctr.Env {
		if e.Name == initialClusterEnv && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == initialClusterFieldPath {
			return pod.Annotations[etcdv1.AnnotationInitialCluster], true
		}
	}
	return "", false
}

// ReadsInitialClusterAnnotation: etcd in pod takes its initial cluster from
// AnnotationInitialCluster (Pods built now), which a patch of the running Pod changes from the
// next container start on, not from a flag (Pods of earlier releases), which only a new Pod
// changes.
func ReadsInitialClusterAnnotation(pod *corev1.Pod) bool {
	_, fromAnnotation := initialClusterOf(pod)
	return fromAnnotation
}

func etcdContainerOf(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == ContainerName {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// RefillsEmptyData is true for a Pod, built by Pod, of a member added by scale-out
// (--initial-cluster-state=existing) whose initial cluster (InitialClusterOf) still names its
// peers: if its data directory were emptied while the Pod stays (a container restart), etcd
// would fetch the membership from those peers and start as the same voter with an empty log.
// Once the member has joined, such a Pod is told to name only the member: in place
// (RequireDataInPlace) when it reads the annotation, by a restart into a Pod RequireData
// builds when it has the flag. Founding members (state new) need neither: etcd itself refuses
// to bootstrap again a member its peers know ("has already been bootstrapped").
func RefillsEmptyData(pod *corev1.Pod, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) bool {
	ctr := etcdContainerOf(pod)
	if ctr == nil || !slices.Contains(ctr.Args, flagStateExisting) {
		return false
	}
	initial := InitialClusterOf(pod)
	return initial != "" && initial != InitialCluster(c, []string{m.Name})
}

// RequireData makes pod, built by Pod, refuse to start on an empty data directory: it names
// only the member itself as its initial cluster, with --initial-cluster-state=existing. etcd
// reads these only when its data directory is empty; for a member that has joined, empty
// means its data is lost, and etcd would otherwise fetch the membership from its peers and
// start as the same voter with an empty log, able to vote before it caught up. With no peer
// to ask, it exits with "cannot fetch cluster info from peer urls", which the operator reads
// as lost data and answers by replacing the member under a new ID. The initial cluster is set
// where the Pod takes it from: its annotation, or the flag of a Pod an earlier release built.
//
// The Pod's template hash is left as Pod computed it: these change nothing for a member that
// has its data, and must not restart members when the operator starts using them.
func RequireData(pod *corev1.Pod, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) {
	self := InitialCluster(c, []string{m.Name})
	for i := range pod.Spec.Containers {
		args := pod.Spec.Containers[i].Args
		for j, arg := range args {
			switch {
			case strings.HasPrefix(arg, flagInitialCluster):
				args[j] = flagInitialCluster + self
			case strings.HasPrefix(arg, "--initial-cluster-state="):
				args[j] = flagStateExisting
			}
		}
	}
	if ReadsInitialClusterAnnotation(pod) {
		nameOnly(pod, self)
	}
}

// nameOnly sets the initial cluster the Pod's annotation gives etcd to self.
func nameOnly(pod *corev1.Pod, self string) {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[etcdv1.AnnotationInitialCluster] = self
}

// RequireDataInPlace does to a running Pod what RequireData does to a new one, where the
// Pod's spec allows it (only its metadata can change): for a Pod that RefillsEmptyData and
// reads its initial cluster from the annotation, the annotation names only the member. True
// when it changed pod; false for a Pod that needs nothing, or whose flag only a new Pod
// changes.
func RequireDataInPlace(pod *corev1.Pod, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) bool {
	if !RequireDataInPlaceChanges(pod, c, m) {
		return false
	}
	nameOnly(pod, InitialCluster(c, []string{m.Name}))
	return true
}

// RequireDataInPlaceChanges: RequireDataInPlace would change pod. It changes nothing, so a
// caller holding a Pod it must not change asks this before it makes a copy to change.
func RequireDataInPlaceChanges(pod *corev1.Pod, c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember) bool {
	return RefillsEmptyData(pod, c, m) && ReadsInitialClusterAnnotation(pod)
}

// flagForceNewCluster makes etcd rewrite the membership in its data to itself alone.
const flagForceNewCluster = "--force-new-cluster"

// ForceNewCluster makes pod, built by Pod for a member with data, start etcd as a new
// one-member cluster from that data: the quorum-loss recovery's one destructive act (the
// other members are dropped from the membership). Like RequireData it leaves the template
// hash alone: the flag must go with the Pod once the cluster answers, never roll with it.
func ForceNewCluster(pod *corev1.Pod) {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "etcd" && !slices.Contains(pod.Spec.Containers[i].Args, flagForceNewCluster) {
			pod.Spec.Containers[i].Args = append(pod.Spec.Containers[i].Args, flagForceNewCluster)
		}
	}
}

// ForcesNewCluster reports whether pod starts etcd with --force-new-cluster.
func ForcesNewCluster(pod *corev1.Pod) bool {
	for _, ctr := range pod.Spec.Containers {
		if slices.Contains(ctr.Args, flagForceNewCluster) {
			return true
		}
	}
	return false
}

// AdoptedPodIsCurrent is true for the Pod an adopted member had when it was taken over: it
// carries no template hash, because another operator built it. It runs as it is until the
// spec changes (the member reconciler then stamps it with the hash of the Pod built now);
// restarting it only because this operator would have built it differently would restart
// every member of a cluster the moment it is adopted.
func AdoptedPodIsCurrent(m *etcdv1.EtcdMember, pod *corev1.Pod) bool {
	return m.Spec.Adopted != nil && pod.Annotations[etcdv1.AnnotationPodTemplateHash] == ""
}
