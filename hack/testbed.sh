#!/usr/bin/env bash
# Builds the real components the tests run against (kube-apiserver and friends, etcd, kubectl)
# from the Go module proxy into a versioned cache outside the repository, and reuses that cache.
# Nothing prebuilt is downloaded; nothing built is committed.
#
#   hack/testbed.sh envtest      build what envtest needs; print the assets directory last
#   hack/testbed.sh etcd V       build etcd, etcdctl, etcdutl at V; print their directory last
#   hack/testbed.sh kube         build the control plane and kubectl; print their directory last
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-1.37.2}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
CACHE=${ETCD_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator}
KUBE_COMPONENTS=${KUBE_COMPONENTS:-kube-apiserver kubectl kube-controller-manager kube-scheduler}

log() { printf '[testbed] %s\n' "$*" >&2; }

# missing DIR NAME... : true when any of the binaries is absent.
missing() {
  local dir=$1; shift
  local name
  for name in "$@"; do [ -x "$dir/$name" ] || return 0; done
  return 1
}

build_etcd() {
  local version=$1 out="$CACHE/etcd-v$1"
  if ! missing "$out/bin" etcd etcdctl etcdutl; then echo "$out/bin"; return; fi
  log "building etcd v$version (etcd, etcdctl, etcdutl) into $out/bin; about 2 minutes cold"
  local src="$out/src"
  rm -rf "$src" && mkdir -p "$src/etcd" "$out/bin"
  cat >"$src/go.mod" <<MOD
module etcd-build

go 1.24
MOD
  cat >"$src/etcd/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (
    cd "$src"
    go get "go.etcd.io/etcd/server/v3@v$version" "go.etcd.io/etcd/etcdctl/v3@v$version" \
      "go.etcd.io/etcd/etcdutl/v3@v$version" >&2
    CGO_ENABLED=0 go build -trimpath -o "$out/bin.tmp/etcd" ./etcd >&2
    CGO_ENABLED=0 go build -trimpath -o "$out/bin.tmp/etcdctl" go.etcd.io/etcd/etcdctl/v3 >&2
    CGO_ENABLED=0 go build -trimpath -o "$out/bin.tmp/etcdutl" go.etcd.io/etcd/etcdutl/v3 >&2
  )
  mv "$out/bin.tmp/"* "$out/bin/" && rmdir "$out/bin.tmp"
  echo "$out/bin"
}

# kube_wrapper_module DIR: a module that requires k8s.io/kubernetes and pins every staging
# module it replaces with a local path to the release of the same minor.
kube_wrapper_module() {
  local src=$1 gomod staging
  mkdir -p "$src"
  gomod=$(cd "$src" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" |
    sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  staging=$(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$gomod")
  {
    printf 'module kube-build\n\ngo 1.25\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$KUBE_VERSION"
    for m in $staging; do printf '\t%s => %s v0.%s\n' "$m" "$m" "${KUBE_VERSION#1.}"; done
    printf ')\n'
  } >"$src/go.mod"
  printf 'package tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n' >"$src/tools.go"
}

build_kube() {
  local out="$CACHE/kube-v$KUBE_VERSION"
  # shellcheck disable=SC2086
  if ! missing "$out/bin" $KUBE_COMPONENTS; then echo "$out/bin"; return; fi
  local src="$out/src"
  rm -rf "$src"
  kube_wrapper_module "$src"
  mkdir -p "$out/bin"
  (cd "$src" && go mod tidy >&2)
  local c
  for c in $KUBE_COMPONENTS; do
    [ -x "$out/bin/$c" ] && continue
    log "building $c v$KUBE_VERSION; kube-apiserver takes about 9 minutes cold on 2 cores"
    (cd "$src" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$out/bin/$c.tmp" "k8s.io/kubernetes/cmd/$c" >&2)
    mv "$out/bin/$c.tmp" "$out/bin/$c"
  done
  echo "$out/bin"
}

# envtest wants kube-apiserver, etcd and kubectl in one directory.
envtest_assets() {
  local etcd_bin kube_bin dir="$CACHE/envtest-k$KUBE_VERSION-e$ETCD_VERSION"
  etcd_bin=$(build_etcd "$ETCD_VERSION")
  kube_bin=$(KUBE_COMPONENTS="kube-apiserver kubectl" build_kube)
  mkdir -p "$dir"
  ln -sfn "$etcd_bin/etcd" "$dir/etcd"
  ln -sfn "$kube_bin/kube-apiserver" "$dir/kube-apiserver"
  ln -sfn "$kube_bin/kubectl" "$dir/kubectl"
  echo "$dir"
}

case "${1:-envtest}" in
envtest) envtest_assets ;;
etcd) build_etcd "${2:-$ETCD_VERSION}" ;;
kube) build_kube ;;
*) echo "usage: $0 envtest | etcd [VERSION] | kube" >&2; exit 2 ;;
esac
