// Package aenixfixture builds the objects the legacy StatefulSet-based etcd operator
// (github.com/aenix-io/etcd-operator, etcd.aenix.io/v1alpha1) makes for an EtcdCluster with
// default settings, as its factory package builds them: a StatefulSet named after the cluster
// (Pods <cluster>-0..N-1, PVCs data-<pod>), a headless Service <cluster>-headless, a client
// Service <cluster>, and a ConfigMap <cluster>-cluster-state that gives etcd its initial
// cluster through the environment. The unit tests of the migration and the e2e test that
// migrates such a cluster both use it, so they agree on the shape.
package aenixfixture

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// APIVersion and Kind of the legacy EtcdCluster.
const (
	Group      = "etcd.aenix.io"
	APIVersion = Group + "/v1alpha1"
	Kind       = "EtcdCluster"
)

// Labels select a legacy cluster's Pods and Services (its LabelsBuilder WithName,
// WithInstance, WithManagedBy).
func Labels(cluster string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "etcd", "app.kubernetes.io/instance": cluster, "app.kubernetes.io/managed-by": "etcd-operator"}
}

// HeadlessService is the name of the Service that gives the Pods their DNS names.
func HeadlessService(cluster string) string { return cluster + "-headless" }

// ConfigMapName holds etcd's initial cluster state.
func ConfigMapName(cluster string) string { return cluster + "-cluster-state" }

// Legacy is the EtcdCluster a user applies: replicas and a PVC template.
func Legacy(name, namespace string, replicas int32, image string) map[string]any {
	return map[string]any{
		"apiVersion": APIVersion, "kind": Kind,
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"replicas": int64(replicas),
			"storage": map[string]any{"volumeClaimTemplate": map[string]any{"spec": map[string]any{
				"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}},
			}}},
			"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "etcd", "image": image}}}},
		},
	}
}

// ConfigMap is the initial cluster state of a formed cluster.
func ConfigMap(cluster, namespace string, replicas int) *corev1.ConfigMap {
	peers := make([]string, replicas)
	for i := range peers {
		pod := fmt.Sprintf("%s-%d", cluster, i)
		peers[i] = fmt.Sprintf("%s=https://%s.%s.%s.svc:2380", pod, pod, HeadlessService(cluster), namespace)
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(cluster), Namespace: namespace},
		Data: map[string]string{
			"ETCD_INITIAL_CLUSTER_STATE": "new",
			"ETCD_INITIAL_CLUSTER":       strings.Join(peers, ","),
			"ETCD_INITIAL_CLUSTER_TOKEN": cluster + "-" + namespace,
		},
	}
}

// Services are the headless Service and the client Service.
func Services(cluster, namespace string) []*corev1.Service {
	port := func(name string, p int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: p, TargetPort: intstr.FromInt32(p), Protocol: corev1.ProtocolTCP}
	}
	return []*corev1.Service{
		{
			ObjectMeta: metav1.ObjectMeta{Name: HeadlessService(cluster), Namespace: namespace, Labels: Labels(cluster)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
				Selector: Labels(cluster), Ports: []corev1.ServicePort{port("peer", 2380), port("client", 2379)}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: namespace, Labels: Labels(cluster)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: Labels(cluster),
				Ports: []corev1.ServicePort{port("client", 2379), port("metrics", 2381)}},
		},
	}
}

// StatefulSet is the legacy operator's StatefulSet with default settings (no TLS, no
// options): etcd's name and URLs from the Pod's name and namespace, its initial cluster from
// the ConfigMap, peers over https with etcd's self-signed certificates (--peer-auto-tls),
// data in /var/run/etcd/default.etcd on PVC data-<pod>.
func StatefulSet(cluster, namespace string, replicas int32, image string) *appsv1.StatefulSet {
	headless := HeadlessService(cluster)
	args := []string{
		"--name=$(POD_NAME)",
		"--listen-metrics-urls=http://0.0.0.0:2381",
		"--listen-peer-urls=https://0.0.0.0:2380",
		"--listen-client-urls=http://0.0.0.0:2379",
		"--initial-advertise-peer-urls=https://$(POD_NAME)." + headless + ".$(POD_NAMESPACE).svc:2380",
		"--data-dir=/var/run/etcd/default.etcd",
		"--advertise-client-urls=http://$(POD_NAME)." + headless + ".$(POD_NAMESPACE).svc:2379",
		"--peer-auto-tls",
		"--auto-compaction-retention=5m",
		"--snapshot-count=10000",
		// 95% of the 1Gi volume, the legacy default quota
		"--quota-backend-bytes=1020054732",
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(2381)}}, PeriodSeconds: 5}
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: namespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			ServiceName:         headless,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: Labels(cluster)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: Labels(cluster)},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "etcd", Image: image, Command: []string{"etcd"}, Args: args,
						Ports: []corev1.ContainerPort{{Name: "peer", ContainerPort: 2380}, {Name: "client", ContainerPort: 2379}},
						EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(cluster)}}}},
						Env: []corev1.EnvVar{
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
						},
						StartupProbe:   probe("/readyz?serializable=false"),
						LivenessProbe:  probe("/livez"),
						ReadinessProbe: probe("/readyz"),
						VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/var/run/etcd"}},
					}},
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

// Pod is the StatefulSet's Pod of ordinal i as the StatefulSet controller makes it: the
// template, the Pod's name as hostname under the headless Service, the PVC data-<pod>.
func Pod(sts *appsv1.StatefulSet, i int) *corev1.Pod {
	name := fmt.Sprintf("%s-%d", sts.Name, i)
	spec := *sts.Spec.Template.Spec.DeepCopy()
	spec.Hostname, spec.Subdomain = name, sts.Spec.ServiceName
	for j := range spec.Volumes {
		if v := spec.Volumes[j].PersistentVolumeClaim; v != nil {
			v.ClaimName = v.ClaimName + "-" + name
		}
	}
	labels := map[string]string{"statefulset.kubernetes.io/pod-name": name}
	for k, v := range sts.Spec.Template.Labels {
		labels[k] = v
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sts.Namespace, Labels: labels}, Spec: spec}
}

// TLSSecrets names the Secrets of WithTLS, by spec.security.tls field.
func TLSSecrets(cluster string) map[string]string {
	return map[string]string{
		"peerSecret": cluster + "-peer", "peerTrustedCASecret": cluster + "-peer-ca",
		"serverSecret": cluster + "-server", "serverTrustedCASecret": cluster + "-server-ca",
		"clientSecret": cluster + "-client-cert", "clientTrustedCASecret": cluster + "-client-ca",
	}
}

// WithTLS sets spec.security.tls to every Secret of TLSSecrets and gives the StatefulSet the
// legacy factory's TLS: peer and server certificates and the client CA mounted under
// /etc/etcd/pki, https on both ports, client and peer certificates required.
func WithTLS(legacy map[string]any, sts *appsv1.StatefulSet) {
	cluster := sts.Name
	names := TLSSecrets(cluster)
	tls := map[string]any{}
	for k, v := range names {
		tls[k] = v
	}
	legacy["spec"].(map[string]any)["security"] = map[string]any{"tls": tls}
	pod := &sts.Spec.Template.Spec
	ctr := &pod.Containers[0]
	for _, v := range []struct{ volume, secret, dir string }{
		{"peer-trusted-ca-certificate", names["peerTrustedCASecret"], "/etc/etcd/pki/peer/ca"},
		{"peer-certificate", names["peerSecret"], "/etc/etcd/pki/peer/cert"},
		{"server-certificate", names["serverSecret"], "/etc/etcd/pki/server/cert"},
		{"client-trusted-ca-certificate", names["clientTrustedCASecret"], "/etc/etcd/pki/client/ca"},
	} {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: v.volume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: v.secret}}})
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: v.volume, ReadOnly: true, MountPath: v.dir})
	}
	var args []string
	for _, a := range ctr.Args {
		switch {
		case a == "--peer-auto-tls":
			args = append(args, "--peer-trusted-ca-file=/etc/etcd/pki/peer/ca/ca.crt", "--peer-cert-file=/etc/etcd/pki/peer/cert/tls.crt",
				"--peer-key-file=/etc/etcd/pki/peer/cert/tls.key", "--peer-client-cert-auth",
				"--cert-file=/etc/etcd/pki/server/cert/tls.crt", "--key-file=/etc/etcd/pki/server/cert/tls.key",
				"--trusted-ca-file=/etc/etcd/pki/client/ca/ca.crt", "--client-cert-auth")
		case strings.HasPrefix(a, "--listen-client-urls=") || strings.HasPrefix(a, "--advertise-client-urls="):
			args = append(args, strings.Replace(a, "http://", "https://", 1))
		default:
			args = append(args, a)
		}
	}
	ctr.Args = args
}
