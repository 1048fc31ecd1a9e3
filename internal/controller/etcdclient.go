package controller

import (
	"context"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// PlainClientFactory opens clients for clusters without client TLS or auth.
func PlainClientFactory(_ context.Context, _ *etcdv1.EtcdCluster, endpoints []string) (etcd.Client, error) {
	return etcd.New(etcd.Config{Endpoints: endpoints})
}
