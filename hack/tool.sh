#!/usr/bin/env bash
# Builds a pinned Go tool from the module proxy into a versioned cache outside the repository
# and prints its path; a second call reuses the cached binary.
#
#   hack/tool.sh controller-gen | golangci-lint | helm | promtool
set -euo pipefail

CACHE=${ETCD_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator}

promtool_from_debian() {
  local dir="$CACHE/tools/promtool-debian"
  if [ ! -x "$dir/promtool" ]; then
    echo "[tool] unpacking promtool from Debian's prometheus package into $dir" >&2
    local tmp
    tmp=$(mktemp -d)
    # apt-get download needs the package lists: a fresh machine may have none yet.
    if ! (cd "$tmp" && apt-get download prometheus >&2); then
      apt-get update -qq >&2
      (cd "$tmp" && apt-get download prometheus >&2)
    fi
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
    mkdir -p "$dir"
    cp "$tmp/root/usr/bin/promtool" "$dir/promtool"
    rm -rf "$tmp"
  fi
  echo "$dir/promtool"
}

case "${1:-}" in
controller-gen) pkg=sigs.k8s.io/controller-tools/cmd/controller-gen version=v0.23.0 ;;
golangci-lint) pkg=github.com/golangci/golangci-lint/v2/cmd/golangci-lint version=v2.15.0 ;;
helm) pkg=helm.sh/helm/v3/cmd/helm version=v3.22.0 ;;
# Prometheus' own rule checker and rule unit-test runner (promtool test rules), taken from
# Debian's prometheus package: building it from the module proxy took 21 minutes on a 2-core
# machine, the package is a 19 MB download. Only the promtool binary is unpacked, into the
# cache; nothing is installed and no server is started.
promtool) promtool_from_debian; exit ;;
*) echo "usage: $0 controller-gen | golangci-lint | helm | promtool" >&2; exit 2 ;;
esac

dir="$CACHE/tools/$1-$version"
if [ ! -x "$dir/$1" ]; then
  echo "[tool] building $1 $version into $dir" >&2
  mkdir -p "$dir"
  # Outside the repository so that the project's go.mod is neither read nor changed.
  (cd "$dir" && GOBIN="$dir" GOFLAGS= CGO_ENABLED=0 go install "$pkg@$version" >&2)
fi
echo "$dir/$1"
