package specs

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// RoleLabels are a member Pod's labels with etcdv1.LabelRole as the member's role asks:
// etcdv1.RoleLabelVoter on a voter and none on a learner, as Cozystack's operator has it. A
// role not known yet ("") leaves the label as it is. It returns a copy, and whether it
// differs from the labels given.
func RoleLabels(have map[string]string, role etcdv1.MemberRole) (map[string]string, bool) {
	out := make(map[string]string, len(have)+1)
	for k, v := range have {
		out[k] = v
	}
	value, set := have[etcdv1.LabelRole]
	switch role {
	case etcdv1.RoleVoter:
		out[etcdv1.LabelRole] = etcdv1.RoleLabelVoter
		return out, !set || value != etcdv1.RoleLabelVoter
	case "":
		return out, false
	default:
		delete(out, etcdv1.LabelRole)
		return out, set
	}
}

// HasLegacyRoleLabel is true when a Pod's role label still has a value of before Cozystack's
// (etcdv1.LegacyRoleLabelVoter, etcdv1.LegacyRoleLabelLearner).
func HasLegacyRoleLabel(podLabels map[string]string) bool {
	v := podLabels[etcdv1.LabelRole]
	return v == etcdv1.LegacyRoleLabelVoter || v == etcdv1.LegacyRoleLabelLearner
}

// PDBSelector selects a cluster's voters: Cozystack's selector, the cluster label and
// etcdv1.RoleLabelVoter. While a Pod of the cluster still carries an old role value (legacy),
// it selects the old voter value too, so that the voters are all selected before, while and
// after their Pods are relabelled one by one: no moment where a voter is outside the budget
// that keeps the quorum. A learner is selected by neither.
func PDBSelector(cluster string, legacy bool) *metav1.LabelSelector {
	match := ClusterLabels(cluster)
	if !legacy {
		match[etcdv1.LabelRole] = etcdv1.RoleLabelVoter
		return &metav1.LabelSelector{MatchLabels: match}
	}
	return &metav1.LabelSelector{
		MatchLabels: match,
		MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: etcdv1.LabelRole, Operator: metav1.LabelSelectorOpIn,
			Values: []string{etcdv1.RoleLabelVoter, etcdv1.LegacyRoleLabelVoter},
		}},
	}
}

// RoleLabelWaits is true when a Pod may not get these labels yet: they carry the voter value
// and the cluster's PodDisruptionBudget (nil: there is none) does not select them. That is a
// cluster moving over from the old role values whose budget still selects only the old voter
// value: a voter relabelled (or a learner promoted) now would stand outside it, and enough of
// them would let a drain take the quorum. The cluster controller widens the selector first
// (PDBSelector); the Pod is labelled once it has.
func RoleLabelWaits(pdb *policyv1.PodDisruptionBudget, podLabels map[string]string) bool {
	if pdb == nil || podLabels[etcdv1.LabelRole] != etcdv1.RoleLabelVoter {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || pdb.Spec.Selector == nil {
		return true // a budget the operator cannot read: keep the Pod where it is
	}
	return !sel.Matches(labels.Set(podLabels))
}
