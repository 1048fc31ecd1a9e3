#!/usr/bin/env bash
# Builds a pinned Go tool from the module proxy into a versioned cache outside the repository
# and prints its path; a second call reuses the cached binary.
#
#   hack/tool.sh controller-gen | golangci-lint | helm | promtool
set -euo pipefail

CACHE=${ETCD_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator}

case "${1:-}" in
controller-gen) pkg=sigs.k8s.io/controller-tools/cmd/controller-gen version=v0.23.0 ;;
golangci-lint) pkg=github.com/golangci/golangci-lint/v2/cmd/golangci-lint version=v2.15.0 ;;
helm) pkg=helm.sh/helm/v3/cmd/helm version=v3.22.0 ;;
# Prometheus' own rule checker and rule unit-test runner (promtool test rules): heavy, so built
# here, outside both modules, rather than imported.
promtool) pkg=github.com/prometheus/prometheus/cmd/promtool version=v0.316.0 ;;
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
