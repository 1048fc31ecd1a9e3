package v1alpha2

import (
	"encoding/json"
	"testing"
)

func TestMemberBootstrapReadsCozystackBoolean(t *testing.T) {
	for name, tc := range map[string]struct {
		in      string
		want    MemberBootstrap
		pending bool
	}{
		"this operator's": {`{"clusterName":"a","bootstrap":{"initialCluster":"a-1=http://x","initialClusterState":"new","clusterToken":"t"}}`,
			MemberBootstrap{InitialCluster: "a-1=http://x", InitialClusterState: InitialClusterStateNew, ClusterToken: "t"}, false},
		"cozystack seed":  {`{"clusterName":"a","bootstrap":true,"initialCluster":"a-x=http://x"}`, MemberBootstrap{}, true},
		"cozystack other": {`{"clusterName":"a","bootstrap": false}`, MemberBootstrap{}, true},
		"cozystack none":  {`{"clusterName":"a"}`, MemberBootstrap{}, true},
	} {
		t.Run(name, func(t *testing.T) {
			var m EtcdMember
			if err := json.Unmarshal([]byte(`{"spec":`+tc.in+`}`), &m); err != nil {
				t.Fatal(err)
			}
			if m.Spec.Bootstrap != tc.want || m.AdoptionPending() != tc.pending || m.Spec.ClusterName != "a" {
				t.Errorf("got %+v pending %t", m.Spec.Bootstrap, m.AdoptionPending())
			}
		})
	}
	var b MemberBootstrap
	if err := json.Unmarshal([]byte(`"yes"`), &b); err == nil {
		t.Error("a string bootstrap must not decode")
	}
}
