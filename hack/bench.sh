#!/usr/bin/env bash
# make bench: the local cluster, the operator deployed from config/, the benchmark
# (test/bench: the operator's times beside a floor measured in the same run, and its API
# writes and memory at rest), and the local cluster stopped again whatever the outcome
# (KEEP_CLUSTER=1 keeps it; BENCH_FLAGS passes flags, e.g. "-runs 1 -idle-window 30s").
set -euo pipefail
cd "$(dirname "$0")/.."
began=$SECONDS

# Compiled before taking the lock: whoever else holds the cluster need not wait for it.
CGO_ENABLED=0 go build -o bin/bench ./test/bench

# One local cluster per machine: wait for whoever else (another checkout, make test-e2e) has it.
exec 9>/tmp/etcd-operator-localcluster.lock
flock 9

if [ "${KEEP_CLUSTER:-}" != 1 ]; then
  trap 'make --no-print-directory local-down; echo "make bench took $((SECONDS - began))s"' EXIT
fi
KUBECONFIG=$(hack/local-up.sh 9>&- | tail -n1) # the cluster outlives this script: no lock for it
export KUBECONFIG
hack/deploy-operator.sh
# shellcheck disable=SC2086 # BENCH_FLAGS is a list of flags
bin/bench ${BENCH_FLAGS:-}
