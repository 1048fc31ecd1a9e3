#!/usr/bin/env bash
# Our operator beside Cozystack's etcd-operator on the local cluster, on one stopwatch
# (test/bench -versus; docs/development.md, "Side by side with Cozystack's operator").
#
#   hack/cozystack-side-by-side.sh              build theirs, start the local cluster, compare
#   hack/cozystack-side-by-side.sh prepare      only what needs no cluster: build, render
#   hack/cozystack-side-by-side.sh switch SIDE  make SIDE (ours | cozystack) the one operator
#                                               running; the bench calls it between turns
#
# Their source is fetched at run time at a pinned version (the Go module proxy first, else
# git) and built here; nothing of it enters this repository. Both operators serve
# etcd-operator.cozystack.io/v1alpha2 with CRDs of the same names, so theirs replace ours
# while theirs runs (our Deployment at 0), and ours come back for our turns and at the end.
# Like make bench: the cluster stops at the end unless KEEP_CLUSTER=1, and then the cluster is
# left as it was (ours running, theirs removed); BENCH_FLAGS passes flags to the bench.
set -euo pipefail
shopt -s inherit_errexit # a failure inside $(...) stops the script too
cd "$(dirname "$0")/.."
export GOWORK=off

COZYSTACK_VERSION=${COZYSTACK_VERSION:-v0.5.4}
# The tag's commit, checked when the source comes from git (the proxy's zips are checked
# against the checksum database instead).
COZYSTACK_COMMIT=${COZYSTACK_COMMIT:-a60dd5667f531b54012849202445a55d845932ec}
# Where the source comes from when the proxy does not serve the module: a URL or a local
# git directory holding the tag.
COZYSTACK_GIT=${COZYSTACK_GIT:-https://github.com/cozystack/etcd-operator.git}
CACHE=${ETCD_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator}

module=github.com/cozystack/etcd-operator
image=ghcr.io/cozystack/etcd-operator:$COZYSTACK_VERSION
binary=$PWD/bin/cozystack-etcd-operator-$COZYSTACK_VERSION
install_dir=$PWD/bin/cozystack-install
release=cozystack # their chart's release: names cozystack-etcd-operator-*, label app.kubernetes.io/instance
namespace=cozystack-etcd-operator
deployment=$release-etcd-operator
bench_label=etcd-operator.cozystack.io/bench=true # test/bench's benchLabel

log() { printf '[cozystack] %s\n' "$*" >&2; }
# shellcheck source=hack/lib/operators.sh
source hack/lib/operators.sh

# source_dir prints the directory of their source at the pinned version.
source_dir() {
  local dir
  dir=$(cd "$CACHE" && go mod download -json "$module@$COZYSTACK_VERSION" 2>/dev/null |
    sed -n 's/^\t"Dir": "\(.*\)",$/\1/p') || true
  if [ -n "$dir" ]; then echo "$dir"; return; fi
  local out="$CACHE/cozystack-etcd-operator-$COZYSTACK_VERSION/src"
  if [ -f "$out/go.mod" ]; then echo "$out"; return; fi
  log "the module proxy does not serve $module@$COZYSTACK_VERSION; taking the tag from $COZYSTACK_GIT"
  local git commit
  git=$(git_dir "$COZYSTACK_VERSION")
  commit=$(git --git-dir="$git" rev-parse --verify "$COZYSTACK_VERSION^{commit}")
  if [ "$commit" != "$COZYSTACK_COMMIT" ]; then
    log "$COZYSTACK_VERSION is $commit there, not the pinned $COZYSTACK_COMMIT: refusing it"
    exit 1
  fi
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  git --git-dir="$git" archive "$commit" | tar -x -C "$out.tmp"
  rm -rf "$out" && mv "$out.tmp" "$out"
  echo "$out"
}

# build compiles their manager (the module's root package, as their Dockerfile does) into bin/.
build() {
  local src=$1 began=$SECONDS
  if [ -x "$binary" ]; then return; fi
  log "building $module $COZYSTACK_VERSION into $binary; about 3 minutes cold on 2 cores"
  mkdir -p bin
  (cd "$src" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$binary.tmp" .) >&2
  mv "$binary.tmp" "$binary"
  log "built in $((SECONDS - began))s, $(du -h "$binary" | cut -f1)"
}

# image_entry is their image in the local cluster's image map: the manager as /manager, its
# entrypoint; their etcd image is quay.io/coreos/etcd:v<version>, which the map has already.
image_entry() {
  cat <<YAML
$image:
  files:
    /manager: $binary
  entrypoint: [/manager]
  env: [PATH=/]
YAML
}

# render writes their chart, rendered, under a kustomization that changes what the local
# cluster needs: the Deployment starts at 0 replicas (switch scales it), and it names the
# user their image's USER line gives (the local cluster reads no image config).
render() {
  local src=$1 helm
  helm=$(hack/tool.sh helm)
  rm -rf "$install_dir" && mkdir -p "$install_dir"
  # The CRDs are left out: switch applies them in place of ours. kube-rbac-proxy is left out:
  # its image is not in the map, and nothing reads their metrics.
  "$helm" template "$release" "$src/charts/etcd-operator" --namespace "$namespace" \
    --set crds.enabled=false --set namespace.create=true --set kubeRbacProxy.enabled=false \
    --set image.repository="${image%:*}" --set image.tag="$COZYSTACK_VERSION" >"$install_dir/chart.yaml"
  cat >"$install_dir/kustomization.yaml" <<YAML
resources: [chart.yaml]
patches:
  - target: {kind: Deployment, name: $deployment}
    patch: |
      - {op: replace, path: /spec/replicas, value: 0}
      - {op: add, path: /spec/template/spec/securityContext/runAsUser, value: 65532}
      - {op: add, path: /spec/template/spec/securityContext/runAsGroup, value: 65532}
YAML
}

# clear_bench deletes the bench's namespaces and waits until they are gone, while the operator
# that made their clusters still runs: the finalizers are its own.
clear_bench() {
  "$kubectl" delete namespace -l "$bench_label" --wait=true --timeout=10m >/dev/null
}

switch_to_cozystack() {
  local src=$1 lease
  lease=$(sed -n 's/.*LeaderElectionID: *"\([^"]*\)".*/\1/p' "$src/main.go")
  [ -n "$lease" ] || { log "no LeaderElectionID in $src/main.go"; return 1; }
  clear_bench
  stop_deployment etcd-operator-system etcd-operator app.kubernetes.io/name=etcd-operator
  "$kubectl" apply --server-side --force-conflicts -f "$src/charts/etcd-operator/crd-bases/" >/dev/null
  "$kubectl" wait --for=condition=Established -f "$src/charts/etcd-operator/crd-bases/" --timeout=1m >/dev/null
  "$kubectl" -n "$namespace" scale deployment "$deployment" --replicas=1 >/dev/null
  "$kubectl" -n "$namespace" rollout status deployment "$deployment" --timeout=3m >&2
  wait_leading "$namespace" "$lease" "app.kubernetes.io/instance=$release"
}

# switch_to_ours puts our CRDs back (the same field manager as theirs, so that nothing of
# theirs stays) with our operator, as hack/deploy-operator.sh deploys it.
switch_to_ours() {
  clear_bench
  if "$kubectl" get namespace "$namespace" >/dev/null 2>&1; then
    stop_deployment "$namespace" "$deployment" "app.kubernetes.io/instance=$release"
  fi
  hack/deploy-operator.sh >&2
  wait_leading etcd-operator-system etcd-operator.cozystack.io app.kubernetes.io/name=etcd-operator
}

switch() {
  case ${1:-} in
  ours) switch_to_ours ;;
  cozystack) switch_to_cozystack "${COZYSTACK_SRC:-$(source_dir)}" ;;
  *) echo "usage: $0 switch ours|cozystack" >&2; exit 2 ;;
  esac
}

# refuse_foreign_clusters stops before anything changes when an EtcdCluster lives outside the
# bench's namespaces: while theirs runs, it would take it over.
refuse_foreign_clusters() {
  local bench others=()
  bench=" $("$kubectl" get namespaces -l "$bench_label" -o jsonpath='{.items[*].metadata.name}') "
  while read -r ns name; do
    [[ -z $ns || $bench == *" $ns "* ]] || others+=("$ns/$name")
  done < <("$kubectl" get etcdclusters.etcd-operator.cozystack.io -A \
    -o jsonpath='{range .items[*]}{.metadata.namespace} {.metadata.name}{"\n"}{end}')
  if [ ${#others[@]} -gt 0 ]; then
    log "EtcdClusters outside the bench (${others[*]}): Cozystack's operator would take them over; delete them first"
    exit 1
  fi
}

# refresh_image_map gives a cluster that was already running (KEEP_CLUSTER=1 before) the new
# map: it took a copy when it started, which its node agents read at every container start.
refresh_image_map() {
  local copy
  copy="$(dirname "$KUBECONFIG")/images.yaml"
  if ! grep -qF "$image:" "$copy"; then
    log "the running cluster's image map has no $image: giving it bin/images.yaml"
    cp bin/images.yaml "$copy"
  fi
}

# restore leaves a kept cluster as make bench would: ours running with our CRDs, theirs gone.
restore() {
  switch ours || log "could not switch back to ours: run hack/deploy-operator.sh"
  "$kubectl" kustomize "$install_dir" | "$kubectl" delete --ignore-not-found --wait=false -f - >/dev/null ||
    log "could not delete their Deployment, RBAC and namespace ($install_dir)"
}

# prepare does all that needs no cluster: their operator built, its image entry and install
# manifests written, the bench built. Before the cluster's lock: nobody waiting for the
# cluster waits for it.
prepare() {
  local src
  mkdir -p "$CACHE" bin
  src=$(source_dir)
  build "$src"
  export COZYSTACK_SRC=$src
  image_entry >bin/cozystack-images.yaml
  render "$src"
  kubectl=$(kubectl_path)
  "$kubectl" kustomize "$install_dir" >/dev/null
  CGO_ENABLED=0 go -C test build -o "$PWD/bin/bench" ./bench
}

main() {
  prepare
  export EXTRA_IMAGES="${EXTRA_IMAGES:-} $PWD/bin/cozystack-images.yaml"
  # The local cluster (under its lock), our operator deployed, KUBECONFIG exported; the
  # cluster stops when this script exits unless KEEP_CLUSTER=1.
  # shellcheck source=hack/operator-up.sh
  source hack/operator-up.sh
  refresh_image_map
  refuse_foreign_clusters
  if [ "${KEEP_CLUSTER:-}" = 1 ]; then trap restore EXIT; fi
  "$kubectl" kustomize "$install_dir" | "$kubectl" apply --server-side --force-conflicts -f - >/dev/null
  # shellcheck disable=SC2086 # BENCH_FLAGS is a list of flags
  bin/bench -versus "cozystack@$COZYSTACK_VERSION" -switch-operator "hack/cozystack-side-by-side.sh switch" ${BENCH_FLAGS:-}
}

run_recipe "ours|cozystack" "$@"
