#!/usr/bin/env bash
# make test-e2e: the local cluster, the operator deployed from config/, the end-to-end suite,
# and the local cluster stopped again whatever the outcome (KEEP_CLUSTER=1 keeps it;
# E2E_RUN=regexp picks tests).
set -euo pipefail
cd "$(dirname "$0")/.."

# cert-manager is part of every run: the TLS tests need it.
export LOCALCLUSTER_ADDONS=${LOCALCLUSTER_ADDONS-cert-manager}

# shellcheck source=hack/operator-up.sh
source hack/operator-up.sh
# The TLS journey's tests run the documented kubectl commands with this kubectl.
E2E_KUBECTL=${E2E_KUBECTL:-$(hack/testbed.sh kube | tail -n1)/kubectl}
export E2E_KUBECTL
# Tests that leave the operator alone run E2E_PARALLEL at a time (see test/e2e/suite_test.go).
go test -count=1 -timeout 40m -parallel "${E2E_PARALLEL:-4}" -v -run "${E2E_RUN:-.}" ./test/e2e/ 2>&1 | grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)|"logger":"etcd-client"'
