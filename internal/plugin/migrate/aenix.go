package migrate

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/convert"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// aenixOperator names the legacy operator in refusals.
const aenixOperator = "the legacy etcd.aenix.io operator"

// AenixObserved is what the command read of one cluster of the legacy StatefulSet-based
// operator (aenix-io/etcd-operator, etcd.aenix.io/v1alpha1).
type AenixObserved struct {
	// Legacy is its EtcdCluster as the API server returned it.
	Legacy map[string]any
	// StatefulSet is the one the legacy operator made, named after the cluster.
	StatefulSet *appsv1.StatefulSet
	Pods        map[string]*corev1.Pod                   // by name
	PVCs        map[string]*corev1.PersistentVolumeClaim // by name
	// ConfigMaps the Pods read their environment from (the legacy operator keeps etcd's
	// initial cluster in <cluster>-cluster-state), by name.
	ConfigMaps map[string]map[string]string
	// Etcd is etcd's member list, asked through the Pods.
	Etcd []etcd.Member
	// Secrets are the data of the Secrets spec.security.tls names (LegacyTLSSecrets), by
	// name; a Secret that does not exist is absent.
	Secrets map[string]map[string][]byte
	// Existing is this operator's EtcdCluster of the same name, if there is one.
	Existing *etcdv1.EtcdCluster
	// Operator is whether the legacy operator still runs.
	Operator OperatorCheck
	// Auth is etcd's authentication, asked with the client certificate this operator will use.
	Auth EtcdAuth
}

// AenixPlan is the adoption of a legacy cluster: this operator's EtcdCluster and one
// EtcdMember per Pod, and what happens to the legacy objects.
type AenixPlan struct {
	Cluster *etcdv1.EtcdCluster
	// Notes are what the translation of the legacy spec reports (convert.Legacy).
	Notes   []string
	Members []MemberChange
	// StatefulSet is deleted with propagationPolicy Orphan: its Pods keep running.
	StatefulSet string
	// HeadlessService stays: it is every member's DNS domain (their peer URLs), those this
	// operator adds included (specs.MembersServiceName).
	// ConfigMaps stay: the adopted Pods read their environment from them.
	HeadlessService string
	ConfigMaps      []string
	// ClientService is the legacy client Service <cluster>, kept: this operator keeps it a
	// client Service of the ready members (specs.AdoptedClientService), so that the
	// applications that use it never reach a learner or a member that is not ready.
	ClientService string
	// Auth says what happens to authentication ("" when etcd has none).
	Auth     string
	Refusals []string
}

// PlanAenix adopts a running cluster of the legacy operator in place: each StatefulSet Pod
// becomes an EtcdMember of its own name, with its PVC (data-<pod>) and data directory as
// they are, and this operator's EtcdCluster gets the translated spec.
func PlanAenix(o AenixObserved) AenixPlan {
	p := AenixPlan{}
	res, err := convert.Legacy(o.Legacy)
	if err != nil {
		p.Refusals = append(p.Refusals, err.Error())
		return p
	}
	c, sts := res.Cluster, o.StatefulSet
	p.Cluster, p.Notes = c, adoptionNotes(res.Notes)
	p.Refusals = append(p.Refusals, aenixClusterRefusals(o, c)...)
	if sts == nil {
		p.Refusals = append(p.Refusals, fmt.Sprintf("the StatefulSet %s is missing: the legacy operator has not built the cluster (or it was deleted); nothing to adopt", c.Name))
		return p
	}
	p.StatefulSet, p.HeadlessService, p.ClientService = sts.Name, sts.Spec.ServiceName, c.Name
	replicas := int(ptrOr(sts.Spec.Replicas, 1))
	if sts.Status.ReadyReplicas != int32(replicas) || sts.Status.CurrentRevision != sts.Status.UpdateRevision {
		p.Refusals = append(p.Refusals, fmt.Sprintf("the StatefulSet %s is not settled (%d of %d Pods ready, revision %s updating to %s): let the legacy operator finish first",
			sts.Name, sts.Status.ReadyReplicas, replicas, sts.Status.CurrentRevision, sts.Status.UpdateRevision))
	}
	names := map[string]bool{}
	var members []string
	for i := range replicas {
		names[fmt.Sprintf("%s-%d", sts.Name, i)] = true
		members = append(members, fmt.Sprintf("%s-%d", sts.Name, i))
	}
	p.Refusals = append(p.Refusals, membershipRefusals(o.Etcd, names, aenixOperator, "has no Pod of the StatefulSet")...)
	c.Spec.Replicas = ptrTo(int32(replicas))
	// Every member under the legacy headless Service, those this operator adds too: the
	// Service <cluster> then stays the legacy client Service (AdoptedSubdomainEveryMember).
	everyMember := append(slices.Clone(members), etcdv1.AdoptedSubdomainEveryMember)
	c.Annotations = merged(c.Annotations, map[string]string{etcdv1.AnnotationAdoptedSubdomain: specs.AdoptedSubdomainValue(sts.Spec.ServiceName, everyMember)})
	versions, peerModes, configMaps := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, name := range members {
		change, pm, why := planAenixMember(o, c, name)
		if why != "" {
			p.Refusals = append(p.Refusals, fmt.Sprintf("member %s: %s", name, why))
			continue
		}
		versions[change.Spec.Version] = true
		peerModes[pm.peer] = true
		for _, cm := range pm.configMaps {
			configMaps[cm] = true
		}
		p.Members = append(p.Members, change)
	}
	p.ConfigMaps = slices.Sorted(maps.Keys(configMaps))
	p.Refusals = append(p.Refusals, settleFromPods(c, versions, peerModes)...)
	p.Refusals = append(p.Refusals, aenixTLSRefusals(o, c, replicas)...)
	auth, refusals := aenixAuth(o, c)
	p.Auth = auth
	p.Refusals = append(p.Refusals, refusals...)
	return p
}

// settleFromPods takes the etcd version and the peer port's protection from what the Pods
// run, which must agree among themselves and with the spec.
func settleFromPods(c *etcdv1.EtcdCluster, versions, peerModes map[string]bool) []string {
	var out []string
	switch {
	case len(versions) > 1:
		out = append(out, fmt.Sprintf("the Pods run different etcd versions %v: let the legacy operator finish its upgrade first", slices.Sorted(maps.Keys(versions))))
	case len(versions) == 1:
		c.Spec.Version = slices.Sorted(maps.Keys(versions))[0]
	}
	specPeer := "plain"
	if c.Spec.TLS != nil && c.Spec.TLS.Peer != nil {
		specPeer = "secret"
	}
	switch {
	case len(peerModes) > 1:
		out = append(out, "the Pods do not all protect the peer port the same way: let the legacy operator finish its roll first")
	case peerModes["auto"] && specPeer == "plain":
		c.Spec.TLS = withPeerAuto(c.Spec.TLS)
	case len(peerModes) == 1 && !peerModes[specPeer]:
		out = append(out, fmt.Sprintf("the Pods protect the peer port as %v but spec.security.tls says %s: let the legacy operator finish its roll first", slices.Sorted(maps.Keys(peerModes)), specPeer))
	}
	return out
}

func aenixClusterRefusals(o AenixObserved, c *etcdv1.EtcdCluster) []string {
	var out []string
	if c.Spec.Replicas != nil && *c.Spec.Replicas == 0 {
		out = append(out, "spec.replicas is 0: there is no running member to adopt")
	}
	if o.Existing != nil && o.Existing.Annotations[etcdv1.AnnotationAdoptedSubdomain] == "" {
		out = append(out, fmt.Sprintf("this operator's EtcdCluster %s already exists: delete it (it is not the legacy cluster) or adopt into another namespace", o.Existing.Name))
	}
	return append(out, o.Operator.Refusals("the legacy operator")...)
}

// aenixPod is what a member's Pod says beyond its MemberChange.
type aenixPod struct {
	peer       string // "auto" (--peer-auto-tls), "plain"
	configMaps []string
}

// planAenixMember reads one member's identity from its running Pod.
func planAenixMember(o AenixObserved, c *etcdv1.EtcdCluster, name string) (MemberChange, aenixPod, string) {
	pod := o.Pods[name]
	switch {
	case pod == nil:
		return MemberChange{}, aenixPod{}, fmt.Sprintf("the StatefulSet's Pod %s is missing: let the legacy operator heal it first", name)
	case !podReady(pod):
		return MemberChange{}, aenixPod{}, fmt.Sprintf("its Pod %s is not Ready: adopt a healthy cluster", name)
	}
	flags, mounts, cms, ok := podSettings(pod, o.ConfigMaps)
	if !ok {
		return MemberChange{}, aenixPod{}, fmt.Sprintf("Pod %s has no etcd container", name)
	}
	if flags["name"] != name {
		return MemberChange{}, aenixPod{}, fmt.Sprintf("Pod %s runs etcd --name=%q, not its own name", name, flags["name"])
	}
	if flags["initial-cluster"] == "" || flags["initial-cluster-token"] == "" {
		return MemberChange{}, aenixPod{}, fmt.Sprintf("Pod %s has no initial cluster or token (flags, or ETCD_INITIAL_CLUSTER and ETCD_INITIAL_CLUSTER_TOKEN from its ConfigMaps)", name)
	}
	id := etcdID(o.Etcd, name)
	if id == "" {
		return MemberChange{}, aenixPod{}, "etcd does not list it as a member"
	}
	pvc, dataDir, why := dataOnPVC(pod, flags["data-dir"], o.PVCs)
	if why != "" {
		return MemberChange{}, aenixPod{}, why
	}
	peer := aenixPeer(flags)
	tls, why := memberTLS(pod, flags, mounts)
	if why != "" {
		return MemberChange{}, aenixPod{}, why
	}
	version, why := imageVersion(pod)
	if why != "" {
		return MemberChange{}, aenixPod{}, why
	}
	return MemberChange{
		Member: name, MemberID: id, Pod: name, PVC: pvc,
		Spec: etcdv1.EtcdMemberSpec{
			ClusterName: c.Name,
			Version:     version,
			Storage:     *c.Spec.Storage.DeepCopy(),
			Bootstrap: etcdv1.MemberBootstrap{
				InitialCluster:      flags["initial-cluster"],
				InitialClusterState: etcdv1.InitialClusterStateExisting,
				ClusterToken:        flags["initial-cluster-token"],
			},
			TLS:     tls,
			Adopted: &etcdv1.MemberAdoption{From: etcdv1.AdoptedFromAenix, PVCName: pvc, DataDir: dataDir},
		},
	}, aenixPod{peer: peer, configMaps: cms}, ""
}

// aenixPeer is how the Pod protects its peer port: the legacy operator runs --peer-auto-tls
// (this operator's spec.tls.peer.autoTLS) unless spec.security.tls.peerSecret names a
// certificate (spec.tls.peer.secretRef).
func aenixPeer(flags map[string]string) string {
	switch {
	case flags["peer-cert-file"] != "":
		return "secret"
	case flags["peer-auto-tls"] == "true":
		return "auto"
	}
	return "plain"
}

// imageVersion is the etcd release of the Pod's etcd image tag.
func imageVersion(pod *corev1.Pod) (string, string) {
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name != "etcd" {
			continue
		}
		tag := ctr.Image[strings.LastIndex(ctr.Image, ":")+1:]
		v, note := convert.Version(tag)
		if note != "" {
			return "", fmt.Sprintf("Pod %s runs image %s: %s", pod.Name, ctr.Image, note)
		}
		return v, ""
	}
	return "", fmt.Sprintf("Pod %s has no etcd container", pod.Name)
}

// podSettings are etcd's settings in the Pod: its --flags, and its ETCD_* environment
// (etcd reads ETCD_INITIAL_CLUSTER as --initial-cluster) from env and from the ConfigMaps it
// takes its environment from, with $(VAR) references expanded as the kubelet does. Also the
// Secrets it mounts by mount path, and the ConfigMaps it reads.
func podSettings(pod *corev1.Pod, configMaps map[string]map[string]string) (map[string]string, map[string]string, []string, bool) {
	flags, mounts, ok := etcdFlags(pod)
	if !ok {
		return nil, nil, nil, false
	}
	env, used := podEnv(pod, configMaps)
	for k, v := range flags {
		flags[k] = expand(v, env)
	}
	for k, v := range env {
		if flag, ok := strings.CutPrefix(k, "ETCD_"); ok {
			name := strings.ReplaceAll(strings.ToLower(flag), "_", "-")
			if _, set := flags[name]; !set {
				flags[name] = v
			}
		}
	}
	return flags, mounts, used, true
}

// podEnv is the etcd container's environment as far as it can be known without running it:
// its ConfigMaps' keys, the Pod's name and namespace, literal values. used are the ConfigMaps.
func podEnv(pod *corev1.Pod, configMaps map[string]map[string]string) (map[string]string, []string) {
	ctr := etcdContainer(pod)
	env := map[string]string{}
	var used []string
	for _, from := range ctr.EnvFrom {
		if ref := from.ConfigMapRef; ref != nil {
			used = append(used, ref.Name)
			for k, v := range configMaps[ref.Name] {
				env[from.Prefix+k] = v
			}
		}
	}
	fields := map[string]string{"metadata.name": pod.Name, "metadata.namespace": pod.Namespace}
	for _, e := range ctr.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expand(e.Value, env)
		case e.ValueFrom.FieldRef != nil && fields[e.ValueFrom.FieldRef.FieldPath] != "":
			env[e.Name] = fields[e.ValueFrom.FieldRef.FieldPath]
		}
	}
	return env, used
}

// expand replaces $(VAR) with the variable's value, as the kubelet does in a container's
// command and args; an unknown reference stays as written.
func expand(s string, env map[string]string) string {
	for k, v := range env {
		s = strings.ReplaceAll(s, "$("+k+")", v)
	}
	return s
}

func etcdContainer(pod *corev1.Pod) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "etcd" {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// dataOnPVC finds the PVC that holds --data-dir (the volume mounted at the longest prefix of
// it) and where the data directory is once the volume is mounted at /var/lib/etcd, where
// this operator mounts a member's volume: the legacy operator's
// /var/run/etcd/default.etcd on a volume mounted at /var/run/etcd is /var/lib/etcd/default.etcd.
func dataOnPVC(pod *corev1.Pod, dataDir string, pvcs map[string]*corev1.PersistentVolumeClaim) (string, string, string) {
	if dataDir == "" || !path.IsAbs(dataDir) || strings.Contains(dataDir, "..") {
		return "", "", fmt.Sprintf("Pod %s runs etcd with --data-dir=%q: want an absolute path", pod.Name, dataDir)
	}
	dataDir = path.Clean(dataDir)
	ctr := etcdContainer(pod)
	var mount *corev1.VolumeMount
	for i, vm := range ctr.VolumeMounts {
		dir := path.Clean(vm.MountPath)
		if (dataDir == dir || strings.HasPrefix(dataDir, dir+"/")) && (mount == nil || len(dir) > len(path.Clean(mount.MountPath))) {
			mount = &ctr.VolumeMounts[i]
		}
	}
	if mount == nil {
		return "", "", fmt.Sprintf("Pod %s keeps its data (%s) on no volume: it would be lost, adopt only clusters on PVCs", pod.Name, dataDir)
	}
	vol := volumeNamed(pod, mount.Name)
	if vol == nil || vol.PersistentVolumeClaim == nil {
		return "", "", fmt.Sprintf("Pod %s keeps its data on volume %s, not on a PVC (spec.storage.emptyDir): it does not outlive the Pod, so adopt only clusters on PVCs", pod.Name, mount.Name)
	}
	name := vol.PersistentVolumeClaim.ClaimName
	if pvcs[name] == nil {
		return "", "", fmt.Sprintf("PVC %s of Pod %s does not exist", name, pod.Name)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(dataDir, path.Clean(mount.MountPath)), "/")
	return name, path.Join(specs.DataDir, rel), ""
}

func withPeerAuto(t *etcdv1.EtcdClusterTLS) *etcdv1.EtcdClusterTLS {
	if t == nil {
		t = &etcdv1.EtcdClusterTLS{}
	}
	t.Peer = &etcdv1.PeerTLS{AutoTLS: true}
	return t
}

func ptrOr[T any](p *T, fallback T) T {
	if p == nil {
		return fallback
	}
	return *p
}

func ptrTo[T any](v T) *T { return &v }

func merged(into, add map[string]string) map[string]string {
	if into == nil {
		into = map[string]string{}
	}
	for k, v := range add {
		into[k] = v
	}
	return into
}

// Describe prints the plan as the dry run shows it.
func (p AenixPlan) Describe() string {
	var b strings.Builder
	if p.Cluster == nil {
		for _, r := range p.Refusals {
			fmt.Fprintf(&b, "  refused: %s\n", r)
		}
		return b.String()
	}
	c := p.Cluster
	fmt.Fprintf(&b, "legacy EtcdCluster %s (etcd.aenix.io/v1alpha1)\n", c.Name)
	fmt.Fprintf(&b, "  EtcdCluster %s of this operator: created, %d replicas, etcd %s", c.Name, ptrOr(c.Spec.Replicas, 0), c.Spec.Version)
	if specs.PeerAutoTLS(c) {
		fmt.Fprintf(&b, ", peer port TLS with etcd's own certificates (spec.tls.peer.autoTLS, as the legacy operator ran it)")
	}
	fmt.Fprintf(&b, "\n")
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "    note: %s\n", n)
	}
	if p.Auth != "" {
		fmt.Fprintf(&b, "  authentication: %s\n", p.Auth)
	}
	for _, m := range p.Members {
		fmt.Fprintf(&b, "  member %s (etcd ID %s): Pod %s keeps running unchanged\n", m.Member, orNone(m.MemberID), m.Pod)
		fmt.Fprintf(&b, "    EtcdMember %s: created (bootstrap from the Pod's settings, state existing; spec.adopted: data in %s on PVC %s)\n", m.Member, m.Spec.Adopted.DataDir, m.PVC)
		fmt.Fprintf(&b, "    Pod %s and PVC %s: label %s=%s added (metadata only, no restart)\n", m.Pod, m.PVC, etcdv1.LabelMember, m.Member)
	}
	if p.StatefulSet != "" {
		fmt.Fprintf(&b, "  StatefulSet %s: deleted with propagationPolicy Orphan (its Pods and PVCs stay)\n", p.StatefulSet)
		fmt.Fprintf(&b, "  legacy EtcdCluster %s: deleted with propagationPolicy Orphan (the legacy operator then has nothing to act on)\n", c.Name)
		fmt.Fprintf(&b, "  Service %s: kept, owned by the new EtcdCluster (every member's DNS name, which etcd's peer URLs use; the members this operator adds too)\n", p.HeadlessService)
		for _, cm := range p.ConfigMaps {
			fmt.Fprintf(&b, "  ConfigMap %s: kept, owned by the new EtcdCluster (the adopted Pods read their environment from it)\n", cm)
		}
		fmt.Fprintf(&b, "  Service %s: kept, owned by the new EtcdCluster, a client Service of the ready members as before; %s-client is this operator's client Service\n", p.ClientService, c.Name)
		fmt.Fprintf(&b, "  PodDisruptionBudget %s (if there is one): deleted; this operator's of that name replaces it\n", c.Name)
	}
	for _, r := range p.Refusals {
		fmt.Fprintf(&b, "  refused: %s\n", r)
	}
	return b.String()
}
