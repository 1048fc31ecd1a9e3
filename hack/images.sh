#!/usr/bin/env bash
# Writes the local cluster's image map (image reference -> host files) to stdout's last line's
# path: builds the etcd versions, the operator and the test toolbox when missing.
#
#   hack/images.sh OUT_FILE
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:?usage: hack/images.sh OUT_FILE}
ETCD_VERSIONS=${ETCD_VERSIONS:-"3.6.16 3.6.15 3.5.35"}
bin=$PWD/bin
mkdir -p "$bin"

echo "[images] building the operator and the toolbox" >&2
CGO_ENABLED=0 go build -o "$bin/etcd-operator" ./cmd/etcd-operator
CGO_ENABLED=0 go build -o "$bin/toolbox" ./test/localcluster/toolbox

{
  for v in $ETCD_VERSIONS; do
    dir=$(hack/testbed.sh etcd "$v" | tail -n1)
    cat <<YAML
quay.io/coreos/etcd:v$v:
  files:
    /usr/local/bin/etcd: $dir/etcd
    /usr/local/bin/etcdctl: $dir/etcdctl
    /usr/local/bin/etcdutl: $dir/etcdutl
  cmd: [/usr/local/bin/etcd]
  env: [PATH=/usr/local/bin:/usr/bin:/bin]
YAML
  done
  cat <<YAML
etcd-operator:dev:
  files:
    /etcd-operator: $bin/etcd-operator
  entrypoint: [/etcd-operator]
localcluster/toolbox:v1:
  files:
    /toolbox: $bin/toolbox
  entrypoint: [/toolbox]
  env: [PATH=/]
YAML
} >"$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
