#!/usr/bin/env bash
# make test-e2e: the local cluster, the operator deployed from config/, the end-to-end suite,
# and the local cluster stopped again whatever the outcome (KEEP_CLUSTER=1 keeps it;
# E2E_RUN=regexp picks tests, E2E_COUNT=n runs each n times: a flake hunt).
set -euo pipefail
cd "$(dirname "$0")/.."

# cert-manager and MinIO are part of every run: the TLS tests need one, the backup tests the other.
export LOCALCLUSTER_ADDONS=${LOCALCLUSTER_ADDONS-cert-manager minio}

# shellcheck source=hack/operator-up.sh
source hack/operator-up.sh
# The TLS journey's tests run the documented kubectl commands with this kubectl.
E2E_KUBECTL=${E2E_KUBECTL:-$(hack/testbed.sh kube | tail -n1)/kubectl}
export E2E_KUBECTL
# The Helm chart's test installs charts/etcd-operator with this helm.
E2E_HELM=${E2E_HELM:-$(hack/tool.sh helm)}
export E2E_HELM
# Tests that leave the operator alone run E2E_PARALLEL at a time (see test/e2e/suite_test.go).
# The suite is in the test module (test/go.mod). It runs without the machine's cluster lock
# (9>&-): a command a test starts (kubectl wait, the walkthroughs' shell) may outlive a test
# binary that was stopped, and holding the lock it kept every later run waiting.
go -C test test -count="${E2E_COUNT:-1}" -timeout 40m -parallel "${E2E_PARALLEL:-4}" -v -run "${E2E_RUN:-.}" ./e2e/ 9>&- 2>&1 | grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)|"logger":"etcd-client"'
