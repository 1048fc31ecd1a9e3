#!/usr/bin/env bash
# The migrations proven against the real legacy operators on the local cluster (test/legacy;
# docs/development.md, "Migrations from the real legacy operators"): the legacy etcd-operator
# of the etcd.aenix.io API (aenix's, v0.4.x) and Cozystack's etcd-operator v0.5.4 each create
# and run a cluster with TLS and auth; each is stopped, ours started, and `kubectl etcd migrate
# aenix | cozystack` takes the cluster over under a writer, which then scales 3 -> 5 -> 3.
#
#   hack/legacy-migrations.sh              build both, start the local cluster, run test/legacy
#   hack/legacy-migrations.sh prepare      only what needs no cluster: build both, render
#   hack/legacy-migrations.sh switch SIDE  make SIDE (ours | aenix | cozystack) the one
#                                          operator running; test/legacy calls it
#
# Neither legacy operator is served by the Go module proxy, so their source comes from git:
# COZYSTACK_GIT, a URL or a local git directory holding both the v0.4.x tags (the etcd.aenix.io
# API, from before the project moved to Cozystack) and v0.5.4. Each tag is checked against its
# pinned commit, unpacked into the cache and built here; nothing of it enters this repository.
# Not part of make test: CI cannot fetch that source. Like make bench, the cluster stops at the
# end unless KEEP_CLUSTER=1 (then ours is left running and the legacy operators, their RBAC
# and the etcd.aenix.io CRDs are removed; a kept cluster holding EtcdClusters is refused).
# TEST_FLAGS passes flags to the test binary (for example -test.run=Aenix).
set -euo pipefail
shopt -s inherit_errexit # a failure inside $(...) stops the script too
cd "$(dirname "$0")/.."
export GOWORK=off

AENIX_VERSION=${AENIX_VERSION:-v0.4.2}
AENIX_COMMIT=${AENIX_COMMIT:-4438907b2293542f11d67335c4370e09c4072ba5}
export COZYSTACK_VERSION=${COZYSTACK_VERSION:-v0.5.4}
export COZYSTACK_COMMIT=${COZYSTACK_COMMIT:-a60dd5667f531b54012849202445a55d845932ec}
export COZYSTACK_GIT=${COZYSTACK_GIT:-https://github.com/cozystack/etcd-operator.git}
CACHE=${ETCD_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator}

aenix_image=ghcr.io/aenix-io/etcd-operator:$AENIX_VERSION
aenix_binary=$PWD/bin/aenix-etcd-operator-$AENIX_VERSION
aenix_install=$PWD/bin/aenix-install
aenix_namespace=aenix-etcd-operator
aenix_deployment=aenix-etcd-operator-controller-manager
aenix_selector=control-plane=aenix-etcd-operator
aenix_lease=1b04a718.etcd.aenix.io # their LeaderElectionID (cmd/manager/main.go), checked in prepare
aenix_src=$CACHE/aenix-etcd-operator-$AENIX_VERSION/src
cozystack_src=$CACHE/cozystack-etcd-operator-$COZYSTACK_VERSION/src
side_by_side=hack/cozystack-side-by-side.sh
# Each operator's log, kept when it is stopped (its Pod goes, and with it the log the local
# cluster would keep): ours.log, aenix.log, cozystack.log.
LEGACY_LOGS=${LEGACY_LOGS:-/tmp/etcd-operator-legacy-logs}

log() { printf '[legacy] %s\n' "$*" >&2; }
# shellcheck source=hack/lib/operators.sh
source hack/lib/operators.sh

# aenix_source unpacks the pinned aenix tag into the cache, its commit checked.
aenix_source() {
  if [ -f "$aenix_src/go.mod" ]; then return; fi
  local git commit
  git=$(git_dir "$AENIX_VERSION")
  commit=$(git --git-dir="$git" rev-parse --verify "$AENIX_VERSION^{commit}" 2>/dev/null) || {
    log "$COZYSTACK_GIT has no tag $AENIX_VERSION: COZYSTACK_GIT must hold the etcd.aenix.io releases (v0.4.x) too"
    exit 1
  }
  if [ "$commit" != "$AENIX_COMMIT" ]; then
    log "$AENIX_VERSION is $commit there, not the pinned $AENIX_COMMIT: refusing it"
    exit 1
  fi
  rm -rf "$aenix_src.tmp" && mkdir -p "$aenix_src.tmp"
  git --git-dir="$git" archive "$commit" | tar -x -C "$aenix_src.tmp"
  grep -q '^module github.com/aenix-io/etcd-operator$' "$aenix_src.tmp/go.mod" || {
    log "$AENIX_VERSION is not the module github.com/aenix-io/etcd-operator"
    exit 1
  }
  rm -rf "$aenix_src" && mv "$aenix_src.tmp" "$aenix_src"
}

# aenix_build compiles their manager (cmd/manager, as their Dockerfile does) into bin/.
aenix_build() {
  local began=$SECONDS
  if [ -x "$aenix_binary" ]; then return; fi
  log "building aenix's etcd-operator $AENIX_VERSION into $aenix_binary"
  mkdir -p bin
  (cd "$aenix_src" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$aenix_binary.tmp" ./cmd/manager) >&2
  mv "$aenix_binary.tmp" "$aenix_binary"
  log "built in $((SECONDS - began))s"
}

# aenix_render writes their install under a kustomization: their CRDs and manager ClusterRole
# and leader-election Role as their source has them (copied into bin/, never into the repo),
# and a Deployment of their manager without webhooks (theirs need cert-manager, which the
# local cluster does not run; webhooks only default and validate, and the tests' objects are
# complete and valid), at 0 replicas: switch scales it.
aenix_render() {
  local lease
  lease=$(sed -n 's/.*LeaderElectionID: *"\([^"]*\)".*/\1/p' "$aenix_src/cmd/manager/main.go")
  if [ "$lease" != "$aenix_lease" ]; then
    log "their LeaderElectionID is '$lease', not $aenix_lease"
    exit 1
  fi
  rm -rf "$aenix_install" && mkdir -p "$aenix_install/crds"
  cp "$aenix_src"/config/crd/bases/etcd.aenix.io_*.yaml "$aenix_install/crds/"
  cp "$aenix_src/config/rbac/role.yaml" "$aenix_src/config/rbac/leader_election_role.yaml" "$aenix_install/"
  cat >"$aenix_install/operator.yaml" <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: $aenix_namespace}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: controller-manager}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: manager-rolebinding}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: manager-role}
subjects: [{kind: ServiceAccount, name: controller-manager, namespace: $aenix_namespace}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: leader-election-rolebinding}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leader-election-role}
subjects: [{kind: ServiceAccount, name: controller-manager, namespace: $aenix_namespace}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: controller-manager}
spec:
  replicas: 0
  selector: {matchLabels: {${aenix_selector%%=*}: ${aenix_selector#*=}}}
  template:
    metadata: {labels: {${aenix_selector%%=*}: ${aenix_selector#*=}}}
    spec:
      serviceAccountName: controller-manager
      securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532}
      containers:
        - name: manager
          image: $aenix_image
          command: [/manager]
          args: [--leader-elect, --disable-webhooks, --health-probe-bind-address=:8081, --metrics-bind-address=127.0.0.1:8080]
          readinessProbe: {httpGet: {path: /readyz, port: 8081}, periodSeconds: 2}
YAML
  cat >"$aenix_install/kustomization.yaml" <<YAML
namespace: $aenix_namespace
namePrefix: aenix-etcd-operator-
resources: [operator.yaml, role.yaml, leader_election_role.yaml]
YAML
}

# image_entries is both legacy images in the local cluster's image map (their etcd images,
# quay.io/coreos/etcd:v<version>, are in it already).
image_entries() {
  cat <<YAML
$aenix_image:
  files:
    /manager: $aenix_binary
  entrypoint: [/manager]
  env: [PATH=/]
YAML
  cat bin/cozystack-images.yaml
}

# stop_running scales a Deployment that exists and has replicas to 0 and waits until its Pods
# are gone (kubectl wait finds nothing to wait for when there were none).
stop_running() { # NAMESPACE DEPLOYMENT SELECTOR
  local replicas
  replicas=$("$kubectl" -n "$1" get deployment "$2" -o jsonpath='{.spec.replicas}' 2>/dev/null || true)
  if [ -n "$replicas" ] && [ "$replicas" != 0 ]; then
    stop_deployment "$@"
  fi
}

# save_logs appends the log of every Pod of SELECTOR to $LEGACY_LOGS/NAME.log.
save_logs() { # NAMESPACE SELECTOR NAME
  if [ -z "$("$kubectl" -n "$1" get pods -l "$2" -o name 2>/dev/null || true)" ]; then return; fi
  mkdir -p "$LEGACY_LOGS"
  "$kubectl" -n "$1" logs -l "$2" --all-containers --prefix --tail=-1 >>"$LEGACY_LOGS/$3.log" 2>&1 ||
    log "could not keep the log of $2 in $1"
}

stop_aenix() {
  save_logs "$aenix_namespace" "$aenix_selector" aenix
  stop_running "$aenix_namespace" "$aenix_deployment" "$aenix_selector"
}

save_ours() { save_logs etcd-operator-system app.kubernetes.io/name=etcd-operator ours; }
save_cozystack() { save_logs cozystack-etcd-operator app.kubernetes.io/instance=cozystack cozystack; }

# switch_to_aenix stops ours and Cozystack's and starts aenix's (their CRDs are of another
# group, installed beside ours all along).
switch_to_aenix() {
  save_cozystack
  stop_running cozystack-etcd-operator cozystack-etcd-operator app.kubernetes.io/instance=cozystack
  save_ours
  stop_running etcd-operator-system etcd-operator app.kubernetes.io/name=etcd-operator
  "$kubectl" -n "$aenix_namespace" scale deployment "$aenix_deployment" --replicas=1 >/dev/null
  "$kubectl" -n "$aenix_namespace" rollout status deployment "$aenix_deployment" --timeout=3m >&2
  wait_leading "$aenix_namespace" "$aenix_lease" "$aenix_selector"
}

switch() {
  case ${1:-} in
  ours) stop_aenix && save_cozystack && COZYSTACK_SRC=$cozystack_src "$side_by_side" switch ours ;;
  aenix) switch_to_aenix ;;
  cozystack) stop_aenix && save_ours && COZYSTACK_SRC=$cozystack_src "$side_by_side" switch cozystack ;;
  *) echo "usage: $0 switch ours|aenix|cozystack" >&2; exit 2 ;;
  esac
}

# refuse_foreign_clusters stops before anything changes when the cluster (kept from an earlier
# run, KEEP_CLUSTER=1) holds EtcdClusters of either API: the legacy operators, once started,
# would take them over (Cozystack's serves the same kinds as ours).
refuse_foreign_clusters() {
  local out found
  out=$("$kubectl" get etcdclusters.etcd-operator.cozystack.io -A -o name)
  if "$kubectl" get crd etcdclusters.etcd.aenix.io >/dev/null 2>&1; then
    out+=$'\n'$("$kubectl" get etcdclusters.etcd.aenix.io -A -o name)
  fi
  read -r -a found <<<"${out//$'\n'/ }"
  if [ ${#found[@]} -gt 0 ]; then
    log "EtcdClusters already on the cluster (${found[*]}): a legacy operator would take them over; delete them first"
    exit 1
  fi
}

# restore leaves a kept cluster (KEEP_CLUSTER=1) as it was before the run: ours running with
# our CRDs, the legacy operators' Deployments, RBAC and namespaces gone, and the etcd.aenix.io
# CRDs gone too (test/e2e installs its own fixture of them, unless one exists).
restore() {
  switch ours || log "could not switch back to ours: run hack/deploy-operator.sh"
  "$kubectl" kustomize "$aenix_install" | "$kubectl" delete --ignore-not-found --wait=false -f - >/dev/null ||
    log "could not delete aenix's Deployment, RBAC and namespace ($aenix_install)"
  "$kubectl" delete --ignore-not-found --wait=false -f "$aenix_install/crds/" >/dev/null ||
    log "could not delete the etcd.aenix.io CRDs ($aenix_install/crds)"
  "$kubectl" kustomize bin/cozystack-install | "$kubectl" delete --ignore-not-found --wait=false -f - >/dev/null ||
    log "could not delete Cozystack's Deployment, RBAC and namespace (bin/cozystack-install)"
}

# refresh_image_map gives a cluster that was already running (KEEP_CLUSTER=1 before) the new
# map: it took a copy when it started, which its node agents read at every container start.
refresh_image_map() {
  local copy
  copy="$(dirname "$KUBECONFIG")/images.yaml"
  if ! grep -qF "$aenix_image:" "$copy" || ! grep -qF "ghcr.io/cozystack/etcd-operator:$COZYSTACK_VERSION:" "$copy"; then
    log "the running cluster's image map lacks a legacy operator: giving it bin/images.yaml"
    cp bin/images.yaml "$copy"
  fi
}

# prepare does all that needs no cluster: both legacy operators built, their image entries and
# install manifests written, the plugin and the test binary built.
prepare() {
  mkdir -p "$CACHE" bin
  aenix_source
  aenix_build
  aenix_render
  # Cozystack's: built, its image entry and chart rendered by the side-by-side recipe.
  "$side_by_side" prepare
  [ -f "$cozystack_src/go.mod" ] || [ -n "$(cd "$CACHE" && go mod download -json "github.com/cozystack/etcd-operator@$COZYSTACK_VERSION" 2>/dev/null)" ] || {
    log "no source of Cozystack's $COZYSTACK_VERSION at $cozystack_src"
    exit 1
  }
  image_entries >bin/legacy-images.yaml
  kubectl=$(kubectl_path)
  "$kubectl" kustomize "$aenix_install" >/dev/null
  make --no-print-directory plugin >&2
  go -C test test -c -o "$PWD/bin/legacy.test" ./legacy
}

main() {
  prepare
  rm -rf "$LEGACY_LOGS"
  export LEGACY_LOGS # to the switches the tests run
  export EXTRA_IMAGES="${EXTRA_IMAGES:-} $PWD/bin/legacy-images.yaml"
  # The local cluster (under its lock), our operator deployed, KUBECONFIG exported; the
  # cluster stops when this script exits unless KEEP_CLUSTER=1.
  # shellcheck source=hack/operator-up.sh
  source hack/operator-up.sh
  refresh_image_map
  refuse_foreign_clusters
  if [ "${KEEP_CLUSTER:-}" = 1 ]; then trap restore EXIT; fi
  "$kubectl" apply --server-side --force-conflicts -f "$aenix_install/crds/" >/dev/null
  "$kubectl" wait --for=condition=Established -f "$aenix_install/crds/" --timeout=1m >/dev/null
  "$kubectl" kustomize "$aenix_install" | "$kubectl" apply --server-side --force-conflicts -f - >/dev/null
  "$kubectl" kustomize bin/cozystack-install | "$kubectl" apply --server-side --force-conflicts -f - >/dev/null
  export LEGACY_SWITCH="$PWD/hack/legacy-migrations.sh switch" KUBECTL_ETCD=$PWD/bin/kubectl-etcd
  # shellcheck disable=SC2086 # TEST_FLAGS is a list of flags
  (cd test/legacy && "$PWD/../../bin/legacy.test" -test.v -test.count=1 -test.timeout=60m ${TEST_FLAGS:-})
}

run_recipe "ours|aenix|cozystack" "$@"
