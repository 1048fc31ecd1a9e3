#!/usr/bin/env bash
# make robustness: the local cluster, the operator deployed from config/, the robustness
# scenarios (test/cmd/robustness: a recorded workload while faults are injected, then
# linearizability, watch and lost-write checks), and the local cluster stopped again whatever
# the outcome (KEEP_CLUSTER=1 keeps it). ROBUSTNESS_TRIALS (1, the short form
# make test runs; make soak runs 30) sets the faults per scenario,
# ROBUSTNESS_SEED replays a run, ROBUSTNESS_SCENARIOS picks scenarios (comma-separated).
set -euo pipefail
cd "$(dirname "$0")/.."

# Compiled before taking the cluster's lock: nobody waiting for the cluster waits for this.
CGO_ENABLED=0 go -C test build -o "$PWD/bin/robustness" ./cmd/robustness

flags=(-trials "${ROBUSTNESS_TRIALS:-1}")
if [ -n "${ROBUSTNESS_SEED:-}" ]; then
  flags+=(-seed "$ROBUSTNESS_SEED")
fi
if [ -n "${ROBUSTNESS_SCENARIOS:-}" ]; then
  flags+=(-scenarios "$ROBUSTNESS_SCENARIOS")
fi

# The tls-renewal scenario's certificates come from cert-manager; the archive scenario's
# snapshots and segments go to MinIO.
export LOCALCLUSTER_ADDONS=${LOCALCLUSTER_ADDONS-cert-manager minio}

# shellcheck source=hack/operator-up.sh
source hack/operator-up.sh
bin/robustness "${flags[@]}" 9>&- # without the cluster lock, as hack/e2e.sh says why
