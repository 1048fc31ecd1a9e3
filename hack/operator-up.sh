# Sourced by the scripts that need the operator on the local cluster (hack/e2e.sh,
# hack/bench.sh): waits for the machine's one local cluster, starts it, deploys the operator
# from config/ and exports KUBECONFIG. The cluster stops when the sourcing script exits,
# whatever the outcome, unless KEEP_CLUSTER=1.

# One local cluster per machine: wait for whoever else (another checkout, make bench) has it.
# LOCALCLUSTER_LOCK names another lock file when the caller already holds the machine's lock
# for a longer run (see docs/development.md).
exec 9>"${LOCALCLUSTER_LOCK:-/tmp/etcd-operator-localcluster.lock}"
flock 9

# The cluster's logs (its components', the operator's, every member's) are kept in
# CLUSTER_LOGS after the cluster stops, so that a failed run can be read afterwards.
CLUSTER_LOGS=${CLUSTER_LOGS:-/tmp/etcd-operator-localcluster-logs}
if [ "${KEEP_CLUSTER:-}" != 1 ]; then
  trap 'hack/keep-cluster-logs.sh "$CLUSTER_LOGS"; make --no-print-directory local-down' EXIT
fi
KUBECONFIG=$(hack/local-up.sh 9>&- | tail -n1) # the cluster outlives this script: no lock for it
export KUBECONFIG
hack/deploy-operator.sh
