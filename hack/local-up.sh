#!/usr/bin/env bash
# Builds what the local cluster needs (cached after the first run) and starts it in the
# background. The kubeconfig path is the last line of output.
set -euo pipefail
cd "$(dirname "$0")/.."

kube_bin=$(hack/testbed.sh kube | tail -n1)
etcd_bin=$(hack/testbed.sh etcd | tail -n1)
mkdir -p bin
images=$(hack/images.sh "$PWD/bin/images.yaml" | tail -n1)
CGO_ENABLED=0 go build -o bin/localcluster ./cmd/localcluster
exec bin/localcluster up --kube-bin "$kube_bin" --etcd "$etcd_bin/etcd" --images "$images" "$@"
