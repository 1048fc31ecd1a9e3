#!/usr/bin/env bash
# Proves the test bed's cert-manager works end to end: starts etcd and kube-apiserver on loopback,
# installs cert-manager's CRDs, runs the controller built by hack/testbed.sh, and issues a CA from
# a self-signed Issuer and a server certificate from that CA. Everything it starts is stopped and
# its temp dir removed on exit. Listens on 127.0.0.1 only.
#
#   hack/check-cert-manager.sh      exits 0 when the server certificate's secret is complete
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
log() { printf '[check-cert-manager] %s\n' "$*" >&2; }

assets=$(bash "$here/testbed.sh" envtest | tail -1)
cm_bin=$(bash "$here/testbed.sh" cert-manager | tail -1)
crds="$(dirname "$cm_bin")/crds"

tmp=$(mktemp -d)
pids=()
cleanup() {
  local pid
  # Reverse order: the controller before the apiserver before etcd, so none logs a lost peer.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

# free_port TAKEN...: a loopback port nothing listens on now and not among TAKEN. Racy in
# principle, but nothing here binds ports in between.
free_port() {
  local p n
  for ((n = 0; n < 50; n++)); do
    p=$((20000 + RANDOM % 20000))
    case " $* " in *" $p "*) continue ;; esac
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  log "no free port found"; return 1
}

# wait_for SECONDS PID WHAT CMD...: polls CMD once a second until it succeeds, time runs out or
# process PID, which CMD depends on, has died.
wait_for() {
  local secs=$1 pid=$2 what=$3; shift 3
  local n
  for ((n = 0; n < secs; n++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    kill -0 "$pid" 2>/dev/null || { log "process $pid exited while waiting for $what"; return 1; }
    sleep 1
  done
  log "timed out after ${secs}s waiting for $what"; return 1
}

etcd_port=$(free_port)
peer_port=$(free_port "$etcd_port")
api_port=$(free_port "$etcd_port" "$peer_port")

log "starting etcd on 127.0.0.1:$etcd_port"
"$assets/etcd" --data-dir "$tmp/etcd" --listen-client-urls "http://127.0.0.1:$etcd_port" \
  --advertise-client-urls "http://127.0.0.1:$etcd_port" --listen-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "default=http://127.0.0.1:$peer_port" >"$tmp/etcd.log" 2>&1 &
pids+=($!)

# A static token in system:masters is the shortest way to an admin kubeconfig; the service
# account key pair is only there because the apiserver refuses to start without one.
openssl genrsa -out "$tmp/sa.key" 2048 2>/dev/null
openssl rsa -in "$tmp/sa.key" -pubout -out "$tmp/sa.pub" 2>/dev/null
token=$(openssl rand -hex 16)
printf '%s,admin,admin,system:masters\n' "$token" >"$tmp/tokens.csv"

log "starting kube-apiserver on 127.0.0.1:$api_port"
# The apiserver refuses a loopback advertise address for its endpoint reconciler; with nothing
# here reading the kubernetes Service's endpoints, the reconciler is simply switched off.
"$assets/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" --bind-address 127.0.0.1 \
  --advertise-address 127.0.0.1 --endpoint-reconciler-type none --secure-port "$api_port" --cert-dir "$tmp/pki" \
  --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$tmp/sa.pub" \
  --service-account-signing-key-file "$tmp/sa.key" --service-cluster-ip-range 10.214.0.0/24 \
  --authorization-mode RBAC --token-auth-file "$tmp/tokens.csv" >"$tmp/apiserver.log" 2>&1 &
pids+=($!)

export KUBECONFIG="$tmp/kubeconfig"
kubectl() { "$assets/kubectl" "$@"; }
kubectl config set-cluster testbed --server "https://127.0.0.1:$api_port" --insecure-skip-tls-verify=true >/dev/null
kubectl config set-credentials admin --token "$token" >/dev/null
kubectl config set-context testbed --cluster testbed --user admin >/dev/null
kubectl config use-context testbed >/dev/null
wait_for 90 "${pids[1]}" "kube-apiserver /readyz" kubectl get --raw /readyz ||
  { tail -20 "$tmp/apiserver.log" >&2; exit 1; }

log "installing cert-manager CRDs from $crds"
# Server-side apply: the Issuer CRDs are too large for client-side apply's annotation.
kubectl apply --server-side -f "$crds" >/dev/null
kubectl wait --for condition=established --timeout 60s -f "$crds" >/dev/null
kubectl create namespace cert-manager >/dev/null
kubectl create namespace check >/dev/null

log "starting cert-manager-controller (leader election on)"
"$cm_bin/cert-manager-controller" --kubeconfig "$KUBECONFIG" --cluster-resource-namespace cert-manager \
  >"$tmp/cert-manager.log" 2>&1 &
pids+=($!)

kubectl apply -n check -f - >/dev/null <<'YAML'
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: ca}
spec:
  isCA: true
  commonName: check-ca
  secretName: ca
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {name: selfsigned, kind: Issuer}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: ca}
spec: {ca: {secretName: ca}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: server}
spec:
  secretName: server-tls
  dnsNames: [server.check.svc]
  ipAddresses: [127.0.0.1]
  usages: [server auth]
  issuerRef: {name: ca, kind: Issuer}
YAML

if ! kubectl wait -n check --for condition=Ready --timeout 120s \
  issuer/selfsigned certificate/ca issuer/ca certificate/server >&2; then
  kubectl get -n check issuers,certificates,certificaterequests -o wide >&2 || true
  tail -40 "$tmp/cert-manager.log" >&2
  exit 1
fi

for key in ca.crt tls.crt tls.key; do
  kubectl get secret -n check server-tls -o "jsonpath={.data.${key//./\\.}}" | base64 -d >"$tmp/$key"
  [ -s "$tmp/$key" ] || { log "secret server-tls has no $key"; exit 1; }
done
# The chain matters, not just the keys' presence: tls.crt must verify against the issued CA.
openssl verify -CAfile "$tmp/ca.crt" "$tmp/tls.crt" >&2
log "OK: Issuers and Certificates Ready; server-tls holds ca.crt, tls.crt, tls.key and verifies"
