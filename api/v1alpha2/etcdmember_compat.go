package v1alpha2

import (
	"bytes"
	"encoding/json"
)

// UnmarshalJSON reads a member's bootstrap as this operator writes it, and also the boolean
// that Cozystack's etcd-operator stores in the same place (spec.bootstrap: true on its seed
// member). An EtcdMember that operator created stays in the API server as it was written
// when this operator's CRDs replace Cozystack's; decoding it must not fail, or listing the
// members of every cluster would fail with it. Such a member reads with an empty bootstrap,
// which marks it as not adopted yet (see AdoptionPending).
func (b *MemberBootstrap) UnmarshalJSON(data []byte) error {
	trimmed := bytes.TrimSpace(data)
	if bytes.Equal(trimmed, []byte("true")) || bytes.Equal(trimmed, []byte("false")) {
		*b = MemberBootstrap{}
		return nil
	}
	type plain MemberBootstrap // without this method
	return json.Unmarshal(data, (*plain)(b))
}

// AdoptionPending is true for an EtcdMember another operator created that has not been taken
// over yet (`kubectl etcd migrate`): it has no bootstrap of this operator's shape. Neither
// controller acts on it, nor on its cluster, until it is adopted.
func (m *EtcdMember) AdoptionPending() bool {
	return m.Spec.Bootstrap.InitialClusterState == ""
}
