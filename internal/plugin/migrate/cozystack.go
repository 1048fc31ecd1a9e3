// Package migrate decides how `kubectl etcd migrate` takes over clusters that another
// operator runs, in place: from the objects observed to the changes to make. It is pure (no
// client); the command in package plugin reads the objects and applies the plan.
package migrate

import (
	"fmt"
	"path"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdversion"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// CozystackOperatorImage is in the image of Cozystack's etcd-operator as published
// (ghcr.io/cozystack/etcd-operator) and as Cozystack's platform ships it
// (ghcr.io/cozystack/cozystack/etcd-operator). Its Deployment carries the same
// app.kubernetes.io/name label as this operator's, so the image tells them apart.
const CozystackOperatorImage = "cozystack/etcd-operator"

// CozystackFinalizer is the finalizer Cozystack's etcd-operator puts on its EtcdMembers: its
// member controller removes the member from etcd before letting the object go. Nothing
// removes it once that operator is stopped, so adoption takes it off.
const CozystackFinalizer = "etcd-operator.cozystack.io/member-cleanup"

// Observed is what the command read of one cluster.
type Observed struct {
	Cluster *etcdv1.EtcdCluster
	Members []etcdv1.EtcdMember
	Pods    map[string]*corev1.Pod                   // by name
	PVCs    map[string]*corev1.PersistentVolumeClaim // by name
	// Etcd is etcd's member list, asked through the members: the truth about who is a member.
	Etcd []etcd.Member
	// Secrets are the data of the TLS Secrets the members' Pods mount, by name; a Secret
	// that does not exist is absent.
	Secrets map[string]map[string][]byte
	// Operator is whether Cozystack's operator still runs.
	Operator OperatorCheck
	// Auth is etcd's authentication, asked with the credentials this operator will use.
	Auth EtcdAuth
}

// OperatorCheck is whether the operator a migration takes a cluster from still runs: while
// it does, it acts on the members being adopted (it would create, delete or re-configure
// them behind this operator's back).
type OperatorCheck struct {
	// Running are its Deployments that have replicas ("namespace/name").
	Running []string
	// Unknown says why they could not be listed, if so.
	Unknown string
	// Force goes ahead although it may be running: the person has stopped it another way.
	Force bool
}

// Refusals say why the migration must not start while the operator, named who, may run.
func (c OperatorCheck) Refusals(who string) []string {
	var out []string
	switch {
	case c.Force:
	case len(c.Running) > 0:
		out = append(out, fmt.Sprintf("%s is running (Deployment %s): scale it to 0 first, or pass --force", who, strings.Join(c.Running, ", ")))
	case c.Unknown != "":
		out = append(out, fmt.Sprintf("could not check that %s is stopped (%s): stop it, then pass --force", who, c.Unknown))
	}
	return out
}

// Plan is what adoption changes, member by member; Refusals say why it must not start.
type Plan struct {
	Cluster string
	Members []MemberChange
	Adopted []string // members already taken over
	// Auth says what happens to authentication ("" when etcd has none).
	Auth     string
	Refusals []string
}

// MemberChange is the adoption of one member. Every change is to metadata or to the
// EtcdMember, never to a Pod's spec: no Pod restarts.
type MemberChange struct {
	Member string
	// Spec is the EtcdMember's new spec, from what its Pod runs.
	Spec etcdv1.EtcdMemberSpec
	// MemberID is etcd's ID of the member as the EtcdMember's status recorded it.
	MemberID string
	// Pod and PVC get the member label; the PVC records the adoption (specs.AdoptionOf).
	Pod, PVC string
}

// PlanCozystack adopts a cluster whose members Cozystack's etcd-operator created: each Pod
// keeps running as it is, its EtcdMember gets this operator's spec with spec.adopted naming
// the PVC (data-<member>) and data directory (the volume root) that operator used.
func PlanCozystack(o Observed) Plan {
	p := Plan{Cluster: o.Cluster.Name}
	p.Refusals = append(p.Refusals, clusterRefusals(o.Cluster)...)
	p.Refusals = append(p.Refusals, o.Operator.Refusals("Cozystack's operator")...)
	names := map[string]bool{}
	for _, m := range o.Members {
		names[m.Name] = true
	}
	p.Refusals = append(p.Refusals, membershipRefusals(o.Etcd, names, "Cozystack's operator", "has no EtcdMember")...)
	members := append([]etcdv1.EtcdMember(nil), o.Members...)
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	for i := range members {
		m := &members[i]
		if !m.AdoptionPending() {
			p.Adopted = append(p.Adopted, m.Name)
			continue
		}
		change, why := planMember(o, m)
		if why != "" {
			p.Refusals = append(p.Refusals, fmt.Sprintf("member %s: %s", m.Name, why))
			continue
		}
		p.Members = append(p.Members, change)
	}
	if len(p.Members) == 0 && len(p.Refusals) == 0 && len(p.Adopted) == 0 {
		p.Refusals = append(p.Refusals, "the cluster has no EtcdMembers: there is nothing to adopt")
	}
	p.Refusals = append(p.Refusals, cozystackTLSRefusals(o, p.Members)...)
	if len(p.Members) > 0 {
		auth, refusals := cozystackAuth(o.Cluster, o.Auth)
		p.Auth = auth
		p.Refusals = append(p.Refusals, refusals...)
	}
	return p
}

// cozystackTLSRefusals checks the certificates the members mount the way this operator uses
// them: it reaches members at <member>.<cluster>.<namespace>.svc and kubectl etcd checks the
// server certificate against <cluster>-client.<namespace>.svc, and each Secret carries the
// CA in its ca.crt.
func cozystackTLSRefusals(o Observed, members []MemberChange) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range members {
		t := m.Spec.TLS
		if t == nil {
			continue
		}
		member, client := specs.MemberHost(o.Cluster, m.Member), specs.ClientServiceHost(o.Cluster)
		for _, s := range []struct {
			name, field string
			hosts       []string
		}{{t.ServerSecretName, "the Pods' --cert-file", []string{member, client}}, {t.PeerSecretName, "the Pods' --peer-cert-file", []string{member}}} {
			if s.name == "" || seen[s.name] {
				continue
			}
			seen[s.name] = true
			out = append(out, secretRefusals(o.Secrets, s.field, s.name, true, s.hosts, "Cozystack's operator")...)
		}
	}
	return out
}

func clusterRefusals(c *etcdv1.EtcdCluster) []string {
	var out []string
	if c.Spec.Replicas != nil && *c.Spec.Replicas == 0 {
		out = append(out, "the cluster is paused (spec.replicas: 0): resume it under Cozystack's operator first, so that every member has a running Pod to take over")
	}
	return out
}

// membershipRefusals: adoption takes over a settled cluster, where every etcd member is a
// started voter that names one of the members to adopt. A learner or an unknown member is
// the other operator's change in flight; taking over in the middle of it would leave it half
// done. operator names that operator; unknown says what an unknown member lacks.
func membershipRefusals(etcdMembers []etcd.Member, names map[string]bool, operator, unknown string) []string {
	if len(etcdMembers) == 0 {
		return []string{"etcd's member list could not be read: adopt a cluster that answers"}
	}
	var out []string
	for _, em := range etcdMembers {
		switch {
		case !em.IsStarted():
			out = append(out, fmt.Sprintf("etcd member %s (peer %v) was added but never started: let %s finish that scale-up first", em.IDHex(), em.PeerURLs, operator))
		case em.IsLearner:
			out = append(out, fmt.Sprintf("etcd member %s (%s) is a learner: let %s promote it first", em.Name, em.IDHex(), operator))
		case !names[em.Name]:
			out = append(out, fmt.Sprintf("etcd member %s (%s) %s: this is not a settled cluster of %s", em.Name, em.IDHex(), unknown, operator))
		}
	}
	return out
}

// etcdID is the ID etcd knows the member by, "" when it does not list it.
func etcdID(etcdMembers []etcd.Member, name string) string {
	for _, em := range etcdMembers {
		if em.Name == name {
			return em.IDHex()
		}
	}
	return ""
}

// planMember reads one member's identity from its running Pod; why says what prevents it.
func planMember(o Observed, m *etcdv1.EtcdMember) (MemberChange, string) {
	pod := o.Pods[m.Name]
	switch {
	case m.Spec.Dormant:
		return MemberChange{}, "it is dormant (paused): resume the cluster under Cozystack's operator first"
	case !m.DeletionTimestamp.IsZero():
		return MemberChange{}, "it is being deleted: let Cozystack's operator finish the removal first"
	case pod == nil:
		return MemberChange{}, fmt.Sprintf("it has no Pod %s: heal it under Cozystack's operator first (adoption takes over running members only)", m.Name)
	case !podReady(pod):
		return MemberChange{}, fmt.Sprintf("its Pod %s is not Ready: adopt a healthy cluster", pod.Name)
	}
	flags, mounts, ok := etcdFlags(pod)
	if !ok {
		return MemberChange{}, fmt.Sprintf("Pod %s has no etcd container", pod.Name)
	}
	if flags["name"] != m.Name {
		return MemberChange{}, fmt.Sprintf("Pod %s runs etcd --name=%q, not the member's name", pod.Name, flags["name"])
	}
	if flags["initial-cluster"] == "" || flags["initial-cluster-token"] == "" {
		return MemberChange{}, fmt.Sprintf("Pod %s has no --initial-cluster or --initial-cluster-token", pod.Name)
	}
	id := etcdID(o.Etcd, m.Name)
	if id == "" {
		return MemberChange{}, "etcd does not list it as a member: it was removed; delete it under Cozystack's operator first"
	}
	adoption, why := dataLocation(o, m, pod, flags["data-dir"])
	if why != "" {
		return MemberChange{}, why
	}
	tls, why := memberTLS(pod, flags, mounts)
	if why != "" {
		return MemberChange{}, why
	}
	change := MemberChange{
		Member:   m.Name,
		MemberID: id,
		Pod:      pod.Name,
		PVC:      adoption.PVCName,
		Spec: etcdv1.EtcdMemberSpec{
			ClusterName: o.Cluster.Name,
			Version:     m.Spec.Version,
			Storage:     *m.Spec.Storage.DeepCopy(),
			Bootstrap: etcdv1.MemberBootstrap{
				InitialCluster: flags["initial-cluster"],
				// The cluster has formed: the member never bootstraps again.
				InitialClusterState: etcdv1.InitialClusterStateExisting,
				ClusterToken:        flags["initial-cluster-token"],
			},
			TLS:     tls,
			Adopted: adoption,
		},
	}
	if change.Spec.Version == "" {
		change.Spec.Version = o.Cluster.Spec.Version
	}
	// An EtcdMember names its version without the leading v spec.version may have.
	change.Spec.Version = etcdversion.Canonical(change.Spec.Version)
	return change, ""
}

// dataLocation finds where the member keeps its data: the PVC behind the Pod's volume mounted
// at /var/lib/etcd (this operator mounts its data volume there too) and --data-dir inside it.
func dataLocation(o Observed, m *etcdv1.EtcdMember, pod *corev1.Pod, dataDir string) (*etcdv1.MemberAdoption, string) {
	if dataDir != specs.DataDir && !strings.HasPrefix(dataDir, specs.DataDir+"/") || strings.Contains(dataDir, "..") {
		return nil, fmt.Sprintf("Pod %s runs etcd --data-dir=%q, not under %s where this operator mounts a member's volume", pod.Name, dataDir, specs.DataDir)
	}
	vol := volumeMountedAt(pod, specs.DataDir)
	if vol == nil {
		return nil, fmt.Sprintf("Pod %s mounts no volume at %s", pod.Name, specs.DataDir)
	}
	adoption := &etcdv1.MemberAdoption{From: etcdv1.AdoptedFromCozystack, DataDir: path.Clean(dataDir)}
	switch {
	case vol.PersistentVolumeClaim != nil:
		name := vol.PersistentVolumeClaim.ClaimName
		if m.Spec.Storage.Medium == etcdv1.StorageMediumMemory {
			return nil, fmt.Sprintf("the member says medium Memory but Pod %s keeps its data on PVC %s", pod.Name, name)
		}
		if o.PVCs[name] == nil {
			return nil, fmt.Sprintf("PVC %s of Pod %s does not exist", name, pod.Name)
		}
		adoption.PVCName = name
	case vol.EmptyDir != nil && vol.EmptyDir.Medium == corev1.StorageMediumMemory:
		if m.Spec.Storage.Medium != etcdv1.StorageMediumMemory {
			return nil, fmt.Sprintf("Pod %s keeps its data in memory but the member's storage medium is not Memory", pod.Name)
		}
	default:
		return nil, fmt.Sprintf("Pod %s keeps its data neither on a PVC nor in memory", pod.Name)
	}
	return adoption, ""
}

// memberTLS names the Secrets the Pod mounts for the certificate files etcd is given.
func memberTLS(pod *corev1.Pod, flags map[string]string, mounts map[string]string) (*etcdv1.MemberTLS, string) {
	t := &etcdv1.MemberTLS{ClientCertAuth: flags["client-cert-auth"] == "true"}
	for flag, name := range map[string]*string{"cert-file": &t.ServerSecretName, "peer-cert-file": &t.PeerSecretName} {
		file := flags[flag]
		if file == "" {
			continue
		}
		secret := mounts[path.Dir(file)]
		if secret == "" {
			return nil, fmt.Sprintf("Pod %s gives etcd --%s=%s, which is not in a mounted Secret", pod.Name, flag, file)
		}
		*name = secret
	}
	if *t == (etcdv1.MemberTLS{}) {
		return nil, ""
	}
	return t, ""
}

// etcdFlags are the --flag=value settings of the Pod's etcd container (command and args), and
// the Secrets it mounts by mount path.
func etcdFlags(pod *corev1.Pod) (map[string]string, map[string]string, bool) {
	for _, c := range pod.Spec.Containers {
		if c.Name != "etcd" {
			continue
		}
		flags := map[string]string{}
		for _, arg := range append(append([]string(nil), c.Command...), c.Args...) {
			name, value, found := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
			if !strings.HasPrefix(arg, "--") {
				continue
			}
			if !found {
				value = "true"
			}
			flags[name] = value
		}
		mounts := map[string]string{}
		for _, vm := range c.VolumeMounts {
			if v := volumeNamed(pod, vm.Name); v != nil && v.Secret != nil {
				mounts[path.Clean(vm.MountPath)] = v.Secret.SecretName
			}
		}
		return flags, mounts, true
	}
	return nil, nil, false
}

func volumeMountedAt(pod *corev1.Pod, dir string) *corev1.Volume {
	for _, c := range pod.Spec.Containers {
		if c.Name != "etcd" {
			continue
		}
		for _, vm := range c.VolumeMounts {
			if path.Clean(vm.MountPath) == dir {
				return volumeNamed(pod, vm.Name)
			}
		}
	}
	return nil
}

func volumeNamed(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && pod.DeletionTimestamp.IsZero()
		}
	}
	return false
}

// Describe prints the plan as the dry run shows it.
func (p Plan) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "EtcdCluster %s\n", p.Cluster)
	for _, name := range p.Adopted {
		fmt.Fprintf(&b, "  member %s: already adopted, unchanged\n", name)
	}
	for _, c := range p.Members {
		fmt.Fprintf(&b, "  member %s (etcd ID %s): Pod %s keeps running unchanged\n", c.Member, orNone(c.MemberID), c.Pod)
		fmt.Fprintf(&b, "    EtcdMember %s: spec rewritten for this operator (bootstrap from the Pod's flags, state existing; spec.adopted: data in %s", c.Member, c.Spec.Adopted.DataDir)
		if c.PVC != "" {
			fmt.Fprintf(&b, " on PVC %s", c.PVC)
		}
		fmt.Fprintf(&b, "); finalizer %s removed; label %s=%s added\n", CozystackFinalizer, etcdv1.LabelMember, c.Member)
		if t := c.Spec.TLS; t != nil {
			fmt.Fprintf(&b, "    TLS: server Secret %s, peer Secret %s, client certificates required: %t\n", orNone(t.ServerSecretName), orNone(t.PeerSecretName), t.ClientCertAuth)
		}
		fmt.Fprintf(&b, "    Pod %s: label %s=%s added (metadata only, no restart)\n", c.Pod, etcdv1.LabelMember, c.Member)
		if c.PVC != "" {
			fmt.Fprintf(&b, "    PVC %s: label %s=%s, annotations %s, %s added\n", c.PVC, etcdv1.LabelMember, c.Member, etcdv1.AnnotationAdoptedFrom, etcdv1.AnnotationDataDir)
		}
	}
	if p.Auth != "" {
		fmt.Fprintf(&b, "  authentication: %s\n", p.Auth)
	}
	for _, r := range p.Refusals {
		fmt.Fprintf(&b, "  refused: %s\n", r)
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
