#!/usr/bin/env bash
# make bench: first the snapshot bench (hack/bench-snapshot.sh: the snapshot and restore
# agents beside etcdctl, mc and etcdutl by hand, no Kubernetes; SNAPSHOT_BENCH_FLAGS), then
# the local cluster, the operator deployed from config/, the benchmark (test/bench: the
# operator's times beside a floor measured in the same run, and its API writes and memory at
# rest), and the local cluster stopped again whatever the outcome (KEEP_CLUSTER=1 keeps it;
# BENCH_FLAGS passes flags, e.g. "-runs 1 -idle-window 30s").
set -euo pipefail
cd "$(dirname "$0")/.."

# Before the cluster's lock: it needs no cluster, and nobody waiting for the cluster waits for it.
# BENCH_SNAPSHOT=0 leaves it out (make bench-sweep).
if [ "${BENCH_SNAPSHOT:-1}" != 0 ]; then
  hack/bench-snapshot.sh
fi
# The point-in-time recovery figures (hack/bench-archive.sh), no cluster either;
# BENCH_ARCHIVE=0 leaves them out.
if [ "${BENCH_ARCHIVE:-1}" != 0 ]; then
  hack/bench-archive.sh
fi

# Compiled before taking the cluster's lock: nobody waiting for the cluster waits for this.
CGO_ENABLED=0 go -C test build -o "$PWD/bin/bench" ./bench

# shellcheck source=hack/operator-up.sh
source hack/operator-up.sh
# shellcheck disable=SC2086 # BENCH_FLAGS is a list of flags
bin/bench ${BENCH_FLAGS:-} 9>&- # without the cluster lock, as hack/e2e.sh says why
