#!/usr/bin/env bash
# Copies the local cluster's logs to $1 before the cluster stops: its components' logs and
# every container log of the Pods still there (the operator's among them), under
# nodes/<node>/pods/<pod UID>/containers/<container>/<restart>.log.
set -uo pipefail
state=/var/lib/etcd-operator-localcluster
out=$1
rm -rf "$out"
mkdir -p "$out"
cp -r "$state/logs/." "$out/" 2>/dev/null
(cd "$state" && find nodes -name '*.log' -exec cp --parents {} "$out/" \; 2>/dev/null)
echo "cluster logs kept in $out"
