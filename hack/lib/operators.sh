# shellcheck shell=bash
# What the recipes that run another operator beside ours on the local cluster share
# (hack/cozystack-side-by-side.sh, hack/legacy-migrations.sh): sourced, after the script has
# changed to the repository's root and defined log, CACHE and COZYSTACK_GIT.

# git_dir prints a git directory holding TAG: COZYSTACK_GIT itself when it is one, else a bare
# clone of it in the cache, fetched again when it lacks TAG.
git_dir() { # TAG
  local git=$COZYSTACK_GIT
  if [ -d "$git/.git" ]; then git=$git/.git; fi
  if [ ! -d "$git" ]; then
    git="$CACHE/cozystack-etcd-operator.git"
    [ -d "$git" ] || git clone --quiet --bare "$COZYSTACK_GIT" "$git" >&2
    git --git-dir="$git" rev-parse -q --verify "$1^{commit}" >/dev/null ||
      git --git-dir="$git" fetch --quiet --tags origin >&2
  fi
  echo "$git"
}

kubectl_path() { echo "$(hack/testbed.sh kube | tail -n1)/kubectl"; }

# stop_deployment scales a Deployment to 0 and waits until its Pods are gone.
stop_deployment() { # NAMESPACE DEPLOYMENT SELECTOR
  "$kubectl" -n "$1" scale deployment "$2" --replicas=0 >/dev/null
  "$kubectl" -n "$1" wait pods -l "$3" --for=delete --timeout=3m >/dev/null
}

# wait_leading waits until a Pod of SELECTOR that is not going away holds the Lease: an
# operator only acts once it leads, and a predecessor that did not release its Lease (theirs
# does not) holds it for a lease duration more.
wait_leading() { # NAMESPACE LEASE SELECTOR
  local holder pods pod
  for _ in $(seq 240); do
    holder=$("$kubectl" -n "$1" get lease "$2" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)
    pods=$("$kubectl" -n "$1" get pods -l "$3" \
      -o go-template='{{range .items}}{{if not .metadata.deletionTimestamp}}{{.metadata.name}} {{end}}{{end}}')
    for pod in $pods; do
      if [[ $holder == "${pod}_"* ]]; then return; fi
    done
    sleep 0.5
  done
  log "no Pod of $3 in $1 took the Lease $2 within 2 minutes"
  return 1
}

# run_recipe runs the script's command line: no argument runs its main, prepare its prepare,
# switch SIDE its switch with kubectl set; SIDES are the sides its usage names (a|b).
run_recipe() { # SIDES [ARG...]
  local sides=$1
  shift
  case ${1:-} in
  switch)
    kubectl=$(kubectl_path)
    switch "${2:-}"
    ;;
  prepare) prepare ;;
  "") main ;;
  *) echo "usage: $0 [prepare | switch $sides]" >&2; exit 2 ;;
  esac
}
