#!/usr/bin/env bash
# Deploys the operator from config/local (config/default with the image hack/images.sh built)
# into the cluster of $KUBECONFIG and waits for it.
set -euo pipefail
cd "$(dirname "$0")/.."
kubectl="$(hack/testbed.sh kube | tail -n1)/kubectl"
"$kubectl" apply --server-side --force-conflicts -k config/local >/dev/null
"$kubectl" -n etcd-operator-system rollout restart deployment/etcd-operator >/dev/null
"$kubectl" -n etcd-operator-system rollout status deployment/etcd-operator --timeout=180s
