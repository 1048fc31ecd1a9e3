# Sourced by the scripts that need the operator on the local cluster (hack/e2e.sh,
# hack/bench.sh): waits for the machine's one local cluster, starts it, deploys the operator
# from config/ and exports KUBECONFIG. The cluster stops when the sourcing script exits,
# whatever the outcome, unless KEEP_CLUSTER=1.

# One local cluster per machine: wait for whoever else (another checkout, make bench) has it.
exec 9>/tmp/etcd-operator-localcluster.lock
flock 9

if [ "${KEEP_CLUSTER:-}" != 1 ]; then
  trap 'make --no-print-directory local-down' EXIT
fi
KUBECONFIG=$(hack/local-up.sh 9>&- | tail -n1) # the cluster outlives this script: no lock for it
export KUBECONFIG
hack/deploy-operator.sh
