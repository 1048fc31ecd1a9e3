package specs

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// admitted is what the apiserver stores for a decoded EtcdCluster: a name and namespace,
// and the CRD's defaults where the spec leaves them out (the builders may rely on those).
func admitted(c *etcdv1.EtcdCluster) {
	if c.Name == "" {
		c.Name = "fuzz"
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	if c.Spec.Replicas == nil {
		c.Spec.Replicas = ptr(int32(3))
	}
	if c.Spec.Storage.Size == nil {
		size := resource.MustParse("1Gi")
		c.Spec.Storage.Size = &size
	}
	if c.Spec.ProgressDeadlineSeconds == nil {
		c.Spec.ProgressDeadlineSeconds = ptr(int32(600))
	}
}

// buildAll calls every builder the operator calls for a cluster and one of its members.
func buildAll(c *etcdv1.EtcdCluster, m *etcdv1.EtcdMember, voters int32) {
	_ = Pod(c, m, PodOptions{})
	_ = EtcdArgs(c, m)
	_ = PVC(c, m)
	_ = HeadlessService(c)
	_ = ClientService(c)
	_ = PDB(c, voters, false)
	_ = PDB(c, voters, true)
	_ = Selector(c.Name)
	_ = InitialCluster(c, []string{MemberName(c.Name, 0), m.Name})
	_ = ServerDNSNames(c, DefaultClusterDomain)
	_ = PeerDNSNames(c, DefaultClusterDomain)
	for _, ic := range Certificates(c, DefaultClusterDomain) {
		_ = ic.Object
	}
	if ClientTLS(c) {
		_ = ServerSecretName(c)
		_ = OperatorClientSecretName(c)
	}
	if PeerTLS(c) {
		_ = PeerSecretName(c)
	}
	_ = OptionArgs(c.Spec.Options)
}

// Spec decoding and every builder, for any EtcdCluster and EtcdMember JSON that decodes: no
// panic. The seeds (testdata/fuzz/FuzzBuilders) are the samples of config/samples and
// edge cases; plain go test runs them, go test -fuzz=FuzzBuilders explores from them.
func FuzzBuilders(f *testing.F) {
	f.Fuzz(func(t *testing.T, clusterJSON, memberJSON []byte, voters int32) {
		c := &etcdv1.EtcdCluster{}
		if err := json.Unmarshal(clusterJSON, c); err != nil {
			return
		}
		admitted(c)
		m := &etcdv1.EtcdMember{}
		if err := json.Unmarshal(memberJSON, m); err != nil {
			return
		}
		if m.Name == "" {
			m.Name = MemberName(c.Name, 1)
		}
		buildAll(c, m, voters)
	})
}

// Spec decoding of YAML manifests as kubectl sends them: no panic, and what decodes builds.
func FuzzDecodeManifest(f *testing.F) {
	f.Fuzz(func(t *testing.T, manifest []byte) {
		c := &etcdv1.EtcdCluster{}
		if err := yaml.Unmarshal(manifest, c); err != nil {
			return
		}
		admitted(c)
		m := &etcdv1.EtcdMember{Spec: etcdv1.EtcdMemberSpec{ClusterName: c.Name, Version: c.Spec.Version, Storage: c.Spec.Storage}}
		m.Name = MemberName(c.Name, 0)
		buildAll(c, m, *c.Spec.Replicas)
	})
}
