#!/usr/bin/env bash
# make demo: the local cluster, the operator deployed from config/, a sample 3-member
# EtcdCluster, and its status. Builds whatever is missing first (minutes on a cold machine).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*" >&2; }

step "building and starting the local cluster (the first run builds Kubernetes and etcd: ~20 min on 2 cores)"
kubeconfig=$(hack/local-up.sh | tail -n1)
export KUBECONFIG=$kubeconfig
kubectl="$(hack/testbed.sh kube | tail -n1)/kubectl"

step "deploying the operator (config/local: config/default with the image built from this checkout)"
"$kubectl" apply --server-side --force-conflicts -k config/local >/dev/null
"$kubectl" -n etcd-operator-system rollout status deployment/etcd-operator --timeout=180s

step "applying config/samples/etcdcluster.yaml"
"$kubectl" apply -n default -f config/samples/etcdcluster.yaml
if ! "$kubectl" wait -n default etcdcluster/example --for=condition=Available --timeout=300s ||
  ! "$kubectl" wait -n default etcdcluster/example --for=jsonpath='{.status.readyMembers}'=3 --timeout=120s; then
  echo "the cluster is not Available yet; its status:" >&2
  "$kubectl" describe -n default etcdcluster/example >&2
  exit 1
fi

step "status"
"$kubectl" get -n default etcdclusters,etcdmembers,pods,pvc -o wide
"$kubectl" exec -n default example-1 -- etcdctl endpoint health --cluster

cat <<MSG

The local cluster is running. Next:
  export KUBECONFIG=$kubeconfig
  alias kubectl=$kubectl
  kubectl get etcdclusters,etcdmembers,pods
  kubectl scale etcdcluster/example --replicas=5
  kubectl exec example-1 -- etcdctl member list -w table
  make local-down      # stop everything and remove every trace
MSG
