#!/usr/bin/env bash
# Installs the Debian packages the tests and the local cluster use, when missing. Go tools and
# the components under test are built from the Go module proxy by hack/tool.sh and
# hack/testbed.sh, never downloaded prebuilt.
set -euo pipefail

# command -> Debian package
declare -A needed=(
  [git]=git
  [make]=make
  [ip]=iproute2
  [nsenter]=util-linux
  [curl]=curl
)

missing=()
for cmd in "${!needed[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${needed[$cmd]}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[deps] installing ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "[deps] need root to install ${missing[*]}" >&2
    exit 1
  fi
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
command -v go >/dev/null || { echo "[deps] Go is required (go1.26 or newer)" >&2; exit 1; }
