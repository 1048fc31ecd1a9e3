#!/usr/bin/env bash
# make test: every tier in turn, stopping at the first that fails, then each tier's time, so
# that a run's cost can be read off its end (CI gives the whole of it 90 minutes).
set -uo pipefail
cd "$(dirname "$0")/.."

tiers=("$@")
times=()
status=0
for tier in "${tiers[@]}"; do
  start=$SECONDS
  make --no-print-directory "$tier"
  status=$?
  times+=("$tier $((SECONDS - start))")
  [ "$status" -eq 0 ] || break
done

echo
echo "tier                 seconds"
total=0
for t in "${times[@]}"; do
  printf '%-20s %7d\n' "${t% *}" "${t##* }"
  total=$((total + ${t##* }))
done
printf '%-20s %7d\n' total "$total"
[ "$status" -eq 0 ] || echo "make test: ${times[-1]% *} failed"
exit "$status"
