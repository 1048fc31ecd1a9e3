package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Cozystack's etcd-operator (github.com/cozystack/etcd-operator) names members with
// GenerateName "<cluster>-", their PVCs data-<member>, labels them with the cluster labels and
// app.kubernetes.io/component=<member>, and holds each EtcdMember with a member-cleanup
// finalizer. These are such names.
var cozystackMembers = []string{"cz-x7k2p", "cz-q9d4m", "cz-b5t8w"}

// TestMigrateFromCozystackOperator builds a running cluster exactly as Cozystack's operator
// leaves it (its EtcdMembers as that operator's CRD stored them, its Pods, PVCs and labels,
// with real etcd members), runs `kubectl etcd migrate cozystack` (dry run, then --apply) with a
// writer running, and checks that no Pod restarted, no member changed its ID, the cluster is
// reconciled by this operator and scales 3 -> 5 -> 3, and no acknowledged write was lost.
func TestMigrateFromCozystackOperator(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	bin := buildPlugin(t)
	// In a real migration this operator starts after Cozystack's is stopped. Here it runs all
	// along, so the cluster starts with no replicas (nothing to bootstrap) and gets its three
	// once its members exist: from then on the operator waits for their adoption.
	cluster := &etcdv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "cz", Namespace: ns},
		Spec:       etcdv1.EtcdClusterSpec{Replicas: ptr(int32(0)), Version: etcdVersion},
	}
	create(t, cluster)
	buildCozystackCluster(t, cluster)
	setReplicas(t, ns, "cz", 3)
	w := startWriter(t, ns, "cz", "cz")

	checkAdoptionPending(t, bin, ns)
	pods, restarts := podUIDs(t, ns, cozystackMembers), containerRestarts(t, ns, cozystackMembers)
	ids := serviceMemberIDs(t, ns, "cz-client")

	c := applyMigration(t, bin, ns, "cozystack", "cz")
	checkAdopted(t, ns, c, pods, restarts, ids)

	c = scaleOutAndIn(t, ns, "cz")
	// Members the operator did not name sort last, so scale-in takes adopted members first
	// (unless one of its own is unhealthy at that moment, which goes before any healthy one),
	// and their PVCs (data-<member>) with them.
	checkAdoptedRemovals(t, ns, c)
	w.stopAndVerify(t, 50)
}

// checkAdoptionPending: before the migration the operator leaves the cluster alone and says
// why; the dry run prints the plan and changes nothing.
func checkAdoptionPending(t *testing.T, bin, ns string) {
	t.Helper()
	eventually(t, 2*time.Minute, "Progressing says AdoptionPending", func() error {
		cond := meta.FindStatusCondition(getCluster(t, ns, "cz").Status.Conditions, etcdv1.ConditionProgressing)
		if cond == nil || cond.Reason != etcdv1.ReasonAdoptionPending {
			return fmt.Errorf("progressing: %+v", cond)
		}
		return nil
	})
	refusedWhileItsOperatorRuns(t, bin, ns, "cozystack", "cz", "ghcr.io/cozystack/etcd-operator:v0.4.0", "Cozystack's operator")
	out := mustPlugin(t, bin, ns, "migrate", "cozystack", "cz")
	for _, want := range []string{"member cz-x7k2p (etcd ID ", "Pod cz-x7k2p keeps running unchanged", "on PVC data-cz-x7k2p", "dry run: nothing was changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}
	for _, name := range cozystackMembers {
		m := &etcdv1.EtcdMember{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, m); err != nil {
			t.Fatal(err)
		}
		if !m.AdoptionPending() {
			t.Errorf("the dry run changed EtcdMember %s: %+v", name, m.Spec)
		}
		if pvc := getPVC(t, ns, "data-"+name); specs.AdoptionOf(pvc) != nil || pvc.Labels[etcdv1.LabelMember] != "" {
			t.Errorf("the dry run changed PVC %s: labels %v, annotations %v", pvc.Name, pvc.Labels, pvc.Annotations)
		}
		pod := &corev1.Pod{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
			t.Fatal(err)
		}
		if pod.Labels[etcdv1.LabelMember] != "" {
			t.Errorf("the dry run labelled Pod %s: %v", name, pod.Labels)
		}
	}
}

// checkAdopted: the same Pods, not restarted by the migration, the same etcd IDs, and the
// operator's view of each member (spec.adopted, the PVC released by Cozystack's EtcdMember,
// the template hash).
func checkAdopted(t *testing.T, ns string, c *etcdv1.EtcdCluster, pods map[string]string, restarts map[string]int32, ids map[string]string) {
	t.Helper()
	checkSameMembers(t, ns, c, cozystackMembers, pods, ids)
	for _, name := range cozystackMembers {
		checkAdoptedMember(t, ns, name, restarts[name], ids[name])
	}
}

// applyMigration runs `kubectl etcd migrate KIND CLUSTER --apply` with a safety snapshot,
// checks the snapshot, and waits until this operator has settled the cluster at its three
// members.
func applyMigration(t *testing.T, bin, ns, kind, cluster string) *etcdv1.EtcdCluster {
	t.Helper()
	snap := filepath.Join(t.TempDir(), "before-adoption.db")
	out := mustPlugin(t, bin, ns, "migrate", kind, cluster, "--apply", "--snapshot-file", snap)
	t.Logf("kubectl etcd migrate %s %s --apply:\n%s", kind, cluster, out)
	checkSnapshotFile(t, snap)
	return waitSettled(t, ns, cluster, 3, 4*time.Minute)
}

// scaleOutAndIn scales an adopted cluster 3 -> 5 -> 3 under this operator.
func scaleOutAndIn(t *testing.T, ns, cluster string) *etcdv1.EtcdCluster {
	t.Helper()
	var c *etcdv1.EtcdCluster
	for _, n := range []int32{5, 3} {
		setReplicas(t, ns, cluster, n)
		c = waitSettled(t, ns, cluster, n, 6*time.Minute)
		t.Logf("settled at %d: %v", n, memberIDs(c))
	}
	return c
}

// checkSameMembers: after adoption the members run in the Pods they ran in (pods, UIDs by
// name: none was replaced) and keep the etcd IDs they had (ids, by name).
func checkSameMembers(t *testing.T, ns string, c *etcdv1.EtcdCluster, names []string, pods, ids map[string]string) {
	t.Helper()
	if got := podUIDs(t, ns, names); fmt.Sprint(got) != fmt.Sprint(pods) {
		t.Errorf("Pods after adoption %v, before %v: a Pod was replaced", got, pods)
	}
	for name, id := range memberIDs(c) {
		if ids[name] != id {
			t.Errorf("member %s: ID %s in the status, %s in etcd before adoption", name, id, ids[name])
		}
	}
}

// containerRestarts counts the named Pods' container restarts (all containers) before a
// migration: a legacy member that restarted while the test built it (once, under the whole
// suite's load) is not one the migration restarted. Such restarts are logged.
func containerRestarts(t *testing.T, ns string, names []string) map[string]int32 {
	t.Helper()
	out := map[string]int32{}
	for _, name := range names {
		out[name] = restartsOf(getPod(t, ns, name))
		if out[name] != 0 {
			t.Logf("Pod %s restarted %d times before the migration", name, out[name])
		}
	}
	return out
}

func restartsOf(pod *corev1.Pod) int32 {
	var n int32
	for _, cs := range pod.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// neverRestarted reads an adopted member's Pod: its containers restarted no more than the
// before restarts counted before the migration.
func neverRestarted(t *testing.T, ns, name string, before int32) *corev1.Pod {
	t.Helper()
	pod := getPod(t, ns, name)
	if n := restartsOf(pod); n != before {
		t.Errorf("Pod %s: its containers restarted %d times, %d of them during the migration", name, n, n-before)
	}
	return pod
}

func checkAdoptedMember(t *testing.T, ns, name string, restartsBefore int32, id string) {
	t.Helper()
	pod := neverRestarted(t, ns, name, restartsBefore)
	m := &etcdv1.EtcdMember{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	if m.Spec.Adopted == nil || m.Spec.Adopted.PVCName != "data-"+name || m.Spec.Adopted.DataDir != "/var/lib/etcd" {
		t.Errorf("EtcdMember %s: spec.adopted %+v", name, m.Spec.Adopted)
	}
	eventually(t, time.Minute, "adopted Pod and PVC taken over", func() error {
		// The PVC follows this operator's retention policy (default Retain: no owner);
		// Cozystack's EtcdMember no longer owns it, and it records the member's etcd ID.
		pvc := getPVC(t, ns, "data-"+name)
		if ref := metav1.GetControllerOf(pvc); (ref != nil && ref.Kind == "EtcdMember") || pvc.Annotations[etcdv1.AnnotationMemberID] != id {
			return fmt.Errorf("PVC %s: owners %v, annotations %v", pvc.Name, pvc.OwnerReferences, pvc.Annotations)
		}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
			return err
		}
		if pod.Annotations[etcdv1.AnnotationPodTemplateHash] == "" {
			return fmt.Errorf("pod %s has no template hash yet", name)
		}
		return nil
	})
}

func checkAdoptedRemovals(t *testing.T, ns string, c *etcdv1.EtcdCluster) {
	t.Helper()
	left := memberIDs(c)
	gone := 0
	for _, name := range cozystackMembers {
		if _, ok := left[name]; ok {
			continue
		}
		gone++
		eventually(t, 2*time.Minute, "PVC of removed member deleted", func() error {
			err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "data-" + name}, &corev1.PersistentVolumeClaim{})
			if err == nil {
				return fmt.Errorf("PVC data-%s still exists", name)
			}
			return client.IgnoreNotFound(err)
		})
	}
	if gone == 0 {
		t.Errorf("members left %v: want adopted members removed by the scale-in", left)
	}
}

// buildCozystackCluster creates the EtcdMembers, PVCs and Pods of a three-member cluster as
// Cozystack's operator does, and waits until etcd serves through all three.
func buildCozystackCluster(t *testing.T, c *etcdv1.EtcdCluster) {
	t.Helper()
	buildCozystackClusterWith(t, c, false)
}

// buildCozystackClusterWith is buildCozystackCluster, with TLS on both ports when tls is
// set, as Cozystack's buildPod secures them: the Secrets cz-server-tls and cz-peer-tls (each
// with its CA in ca.crt), client and peer certificates required.
func buildCozystackClusterWith(t *testing.T, c *etcdv1.EtcdCluster, tls bool) {
	t.Helper()
	raw := apiserverEtcd(t)
	scheme := "http"
	if tls {
		scheme = "https"
	}
	var peers []string
	for _, name := range cozystackMembers {
		peers = append(peers, fmt.Sprintf("%s=%s://%s.cz.%s.svc:2380", name, scheme, name, c.Namespace))
	}
	initial := strings.Join(peers, ",")
	for i, name := range cozystackMembers {
		uid := putCozystackMember(t, raw, c, name, i == 0, initial)
		owner := []metav1.OwnerReference{{APIVersion: etcdv1.GroupVersion.String(), Kind: "EtcdMember", Name: name, UID: uid,
			Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}
		create(t, cozystackPVC(c.Namespace, name, owner))
		pod := cozystackPod(c.Namespace, name, initial, owner)
		if tls {
			withCozystackTLS(pod)
		}
		create(t, pod)
	}
	eventually(t, 4*time.Minute, "the Cozystack-shaped members are Ready", func() error {
		for _, name := range cozystackMembers {
			pod := &corev1.Pod{}
			if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: c.Namespace, Name: name}, pod); err != nil {
				return err
			}
			if !podIsReady(pod) {
				return fmt.Errorf("pod %s not ready", name)
			}
		}
		return nil
	})
}

func podIsReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// apiserverEtcd is a client of the etcd behind the local cluster's API server. An EtcdMember
// that Cozystack's operator created was stored under that operator's CRD: its spec.bootstrap
// is a boolean, which this operator's CRD refuses. The test writes such objects where the API
// server keeps them, as they would be after Cozystack's CRDs were replaced by this operator's.
func apiserverEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	endpoint := os.Getenv("E2E_APISERVER_ETCD")
	if endpoint == "" {
		endpoint = "http://127.0.0.1:2479"
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// putCozystackMember stores an EtcdMember in the shape of Cozystack's CRD (api/v1alpha2
// EtcdMemberSpec there: bootstrap bool, initialCluster, clusterToken, replicas; status isVoter)
// and waits until the API server serves it.
func putCozystackMember(t *testing.T, raw *clientv3.Client, c *etcdv1.EtcdCluster, name string, seed bool, initial string) types.UID {
	t.Helper()
	uid := uuid.NewUUID()
	spec := map[string]any{
		"clusterName": c.Name, "version": etcdVersion, "storage": map[string]any{"size": "1Gi", "medium": ""},
		"initialCluster": initial, "clusterToken": "cz-token", "replicas": 1,
	}
	if seed {
		spec["bootstrap"] = true
	}
	obj := map[string]any{
		"apiVersion": etcdv1.GroupVersion.String(), "kind": "EtcdMember",
		"metadata": map[string]any{
			"name": name, "namespace": c.Namespace, "uid": string(uid), "generation": 1,
			"creationTimestamp": time.Now().UTC().Format(time.RFC3339),
			"labels":            cozystackLabels(""),
			"finalizers":        []string{"etcd-operator.cozystack.io/member-cleanup"},
			"ownerReferences": []map[string]any{{"apiVersion": etcdv1.GroupVersion.String(), "kind": "EtcdCluster",
				"name": c.Name, "uid": string(c.UID), "controller": true, "blockOwnerDeletion": true}},
		},
		"spec":   spec,
		"status": map[string]any{"podName": name, "isVoter": true},
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("/registry/%s/etcdmembers/%s/%s", etcdv1.GroupVersion.Group, c.Namespace, name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := raw.Put(ctx, key, string(data)); err != nil {
		t.Fatalf("storing EtcdMember %s in the API server's etcd: %v", name, err)
	}
	eventually(t, time.Minute, "the API server serves EtcdMember "+name, func() error {
		m := &etcdv1.EtcdMember{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: c.Namespace, Name: name}, m); err != nil {
			return err
		}
		if m.UID != uid || !m.AdoptionPending() {
			return fmt.Errorf("EtcdMember %s: uid %s, spec %+v", name, m.UID, m.Spec)
		}
		return nil
	})
	return uid
}

// cozystackLabels are Cozystack's clusterLabels, plus memberLabels' component for a member.
func cozystackLabels(member string) map[string]string {
	labels := map[string]string{
		"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": "cz",
		"app.kubernetes.io/managed-by": "etcd-operator", "etcd-operator.cozystack.io/cluster": "cz",
	}
	if member != "" {
		labels["app.kubernetes.io/component"] = member
	}
	return labels
}

func cozystackPVC(ns, name string, owner []metav1.OwnerReference) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-" + name, Namespace: ns, Labels: cozystackLabels(name), OwnerReferences: owner},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// cozystackPod is the Pod of Cozystack's buildPod for a plaintext member: etcd's flags in the
// command, data at the root of PVC data-<member>, /health on the metrics port for readiness.
// The three start together with a static initial cluster (Cozystack's operator adds them one
// by one; the running result is the same).
func cozystackPod(ns, name, initial string, owner []metav1.OwnerReference) *corev1.Pod {
	labels := cozystackLabels(name)
	labels["etcd-operator.cozystack.io/role"] = "voter"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, OwnerReferences: owner},
		Spec: corev1.PodSpec{
			Hostname: name, Subdomain: "cz", AutomountServiceAccountToken: ptr(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(65532)),
				RunAsGroup: ptr(int64(65532)), FSGroup: ptr(int64(65532))},
			Containers: []corev1.Container{{
				Name:  "etcd",
				Image: specs.Image(specs.DefaultImageRepository, etcdVersion),
				Command: []string{"etcd", "--name=" + name, "--data-dir=/var/lib/etcd",
					"--listen-peer-urls=http://0.0.0.0:2380", "--listen-client-urls=http://0.0.0.0:2379",
					fmt.Sprintf("--advertise-client-urls=http://%s.cz.%s.svc:2379", name, ns),
					fmt.Sprintf("--initial-advertise-peer-urls=http://%s.cz.%s.svc:2380", name, ns),
					"--initial-cluster=" + initial, "--initial-cluster-token=cz-token", "--initial-cluster-state=new",
					"--listen-metrics-urls=http://0.0.0.0:2381"},
				Ports:        []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}, {Name: "metrics", ContainerPort: 2381}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(2380)}},
					InitialDelaySeconds: 15, PeriodSeconds: 10, FailureThreshold: 3},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(2381)}},
					InitialDelaySeconds: 5, PeriodSeconds: 5, FailureThreshold: 3},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + name}}}},
		},
	}
}

// withCozystackTLS secures a member Pod as Cozystack's buildPod does with spec.tls: https on
// both ports, the server Secret cz-server-tls at /etc/etcd/tls/client and the peer Secret
// cz-peer-tls at /etc/etcd/tls/peer, client and peer certificates required.
func withCozystackTLS(pod *corev1.Pod) {
	ctr := &pod.Spec.Containers[0]
	var cmd []string
	for _, arg := range ctr.Command {
		switch {
		case strings.HasPrefix(arg, "--listen-metrics-urls="):
			cmd = append(cmd, arg)
		case strings.HasPrefix(arg, "--"):
			cmd = append(cmd, strings.ReplaceAll(arg, "http://", "https://"))
		default:
			cmd = append(cmd, arg)
		}
	}
	ctr.Command = append(cmd,
		"--cert-file=/etc/etcd/tls/client/tls.crt", "--key-file=/etc/etcd/tls/client/tls.key",
		"--client-cert-auth=true", "--trusted-ca-file=/etc/etcd/tls/client/ca.crt",
		"--peer-cert-file=/etc/etcd/tls/peer/tls.crt", "--peer-key-file=/etc/etcd/tls/peer/tls.key",
		"--peer-trusted-ca-file=/etc/etcd/tls/peer/ca.crt", "--peer-client-cert-auth=true")
	for _, v := range []struct{ name, secret, dir string }{{"tls-client", "cz-server-tls", "/etc/etcd/tls/client"}, {"tls-peer", "cz-peer-tls", "/etc/etcd/tls/peer"}} {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: v.name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: v.secret}}})
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: v.name, MountPath: v.dir, ReadOnly: true})
	}
}
