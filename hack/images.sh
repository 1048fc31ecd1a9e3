#!/usr/bin/env bash
# Writes the local cluster's image map (image reference -> host files) to stdout's last line's
# path: builds the etcd versions, the operator and the test toolbox when missing.
#
#   hack/images.sh OUT_FILE
#
# EXTRA_IMAGES names more files of entries in the same form (space-separated), appended as
# they are: images a caller built itself, e.g. another operator's (hack/cozystack-side-by-side.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:?usage: hack/images.sh OUT_FILE}
# The oldest and newest patch of each supported minor (3.5.0 and 3.5.35, 3.6.16, 3.7.3) and
# the previous 3.6 patch for the patch upgrades. Each costs about 1.5 minutes cold here.
ETCD_VERSIONS=${ETCD_VERSIONS:-"3.6.16 3.6.15 3.5.35 3.5.0 3.7.3"}
bin=$PWD/bin
mkdir -p "$bin"

echo "[images] building the operator's image and the toolbox" >&2
# The operator runs from its OCI image, built as make image builds it (for this machine's
# platform only) and unpacked: the image's files, entrypoint and env are what the node runs.
platform=linux/$(go env GOARCH)
layout=$(make --no-print-directory image IMAGE_PLATFORMS="$platform" DIST="$bin/image" IMAGE=etcd-operator | tail -n1)
# make image has just built the image builder (test/cmd/image) into bin/image-builder.
operator=$("$bin/image-builder" unpack -layout "$layout" -platform "$platform" -dir "$bin/image/root" -key etcd-operator:dev)
CGO_ENABLED=0 go -C test build -o "$bin/toolbox" ./localcluster/toolbox

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
  echo "$operator"
  cat <<YAML
localcluster/toolbox:v1:
  files:
    /toolbox: $bin/toolbox
  entrypoint: [/toolbox]
  env: [PATH=/]
YAML
  for extra in ${EXTRA_IMAGES:-}; do cat "$extra"; done
} >"$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
