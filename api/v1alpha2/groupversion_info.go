// Package v1alpha2 holds the etcd-operator.cozystack.io/v1alpha2 API: EtcdCluster (what the user
// writes), EtcdMember (one per member, created by the operator), EtcdSnapshot and EtcdDefrag.
// Field names follow the published v1alpha2 API so that existing manifests apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=etcd-operator.cozystack.io
package v1alpha2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "etcd-operator.cozystack.io", Version: "v1alpha2"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
