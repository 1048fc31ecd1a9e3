#!/usr/bin/env bash
# make bench-snapshot (and the first part of make bench): the snapshot and restore agents
# against the same work done by hand with etcdctl, mc and etcdutl, on a real etcd and a real
# MinIO on loopback; no Kubernetes (test/bench/snapshot). The agent is built as make build
# builds it, so the binary measured is the one shipped. SNAPSHOT_BENCH_FLAGS passes flags,
# e.g. "-runs 1 -db-mib 64".
set -euo pipefail
cd "$(dirname "$0")/.."

etcd_dir=$(hack/testbed.sh etcd | tail -n1)
minio_dir=$(hack/testbed.sh minio | tail -n1)
make --no-print-directory build >&2
CGO_ENABLED=0 go -C test build -o "$PWD/bin/bench-snapshot" ./bench/snapshot
# shellcheck disable=SC2086 # SNAPSHOT_BENCH_FLAGS is a list of flags
bin/bench-snapshot -agent bin/etcd-operator -etcd-dir "$etcd_dir" -minio-dir "$minio_dir" ${SNAPSHOT_BENCH_FLAGS:-}
