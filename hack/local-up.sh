#!/usr/bin/env bash
# Builds what the local cluster needs (cached after the first run) and starts it in the
# background. The kubeconfig path is the last line of output.
set -euo pipefail
cd "$(dirname "$0")/.."

kube_bin=$(hack/testbed.sh kube | tail -n1)
etcd_bin=$(hack/testbed.sh etcd | tail -n1)
mkdir -p bin
images=$(hack/images.sh "$PWD/bin/images.yaml" | tail -n1)
CGO_ENABLED=0 go -C test build -o "$PWD/bin/localcluster" ./cmd/localcluster

# LOCALCLUSTER_ADDONS="cert-manager minio" also starts those (built on first use).
addons=()
for addon in ${LOCALCLUSTER_ADDONS:-}; do
  case $addon in
  cert-manager) addons+=(--cert-manager "$(hack/testbed.sh cert-manager | tail -n1)") ;;
  minio) addons+=(--minio "$(hack/testbed.sh minio | tail -n1)/minio") ;;
  *) echo "unknown add-on $addon (cert-manager, minio)" >&2; exit 2 ;;
  esac
done
exec bin/localcluster up --kube-bin "$kube_bin" --etcd "$etcd_bin/etcd" --images "$images" "${addons[@]}" "$@"
