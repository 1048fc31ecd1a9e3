package cluster

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/auth"
)

// pendingAdoption names the members another operator created that are not adopted yet.
func pendingAdoption(members []*etcdv1.EtcdMember) []string {
	var names []string
	for _, m := range members {
		if m.AdoptionPending() {
			names = append(names, m.Name)
		}
	}
	return names
}

// waitForAdoption keeps the operator's hands off a cluster whose members it does not know how
// to run yet: their Pods keep running as the other operator made them, and nothing is added,
// removed, paused or restarted until they are adopted.
func waitForAdoption(c *etcdv1.EtcdCluster, v *clusterView) error {
	pending := pendingAdoption(v.members)
	if len(pending) == 0 {
		return nil
	}
	return waitFor(etcdv1.ReasonAdoptionPending,
		"members %s were created by another operator and are not adopted yet; nothing is changed until they are: run `kubectl etcd migrate cozystack %s -n %s` (a dry run; add --apply)",
		strings.Join(pending, ", "), c.Name, c.Namespace)
}

// authPendingHere: auth is still to be turned on (auth.Pending) and this operator may do it.
// Not while members wait for adoption: the other operator that runs them is the one turning
// auth on (it creates root and enables auth in etcd). Once adopted, a cluster whose etcd has
// auth on is taken over with it (ensureAuth records the password etcd takes).
func authPendingHere(c *etcdv1.EtcdCluster, v *clusterView) bool {
	return auth.Pending(c) && len(pendingAdoption(v.members)) == 0
}

// memberPVC reads, live, the PVC that holds the data of the member named name: the PVC of
// that name, or one labelled as the member's (an adopted member's PVC has its own name).
func memberPVC(ctx context.Context, reader client.Reader, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, pvc)
	if err == nil || !apierrors.IsNotFound(err) {
		return pvc, err
	}
	list := &corev1.PersistentVolumeClaimList{}
	if err := reader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{etcdv1.LabelMember: name}); err != nil {
		return nil, err
	}
	if len(list.Items) != 1 {
		return nil, apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), name)
	}
	return &list.Items[0], nil
}

// pvcMember is the member whose data a PVC holds: its member label, else its name.
func pvcMember(pvc *corev1.PersistentVolumeClaim) string {
	if name := pvc.Labels[etcdv1.LabelMember]; name != "" {
		return name
	}
	return pvc.Name
}
