#!/bin/bash
# Instruction counts (valgrind --tool=callgrind: deterministic, unlike wall
# time on a shared machine) of the runs the speed targets depend on, for a
# leaseproof build tree. Compare two builds side by side:
#
#   scripts/count-instructions.sh build/release            # this checkout
#   scripts/count-instructions.sh /tmp/other/build/release # another commit
#   scripts/count-instructions.sh build/release-pgo        # the PGO build (scripts/build-pgo.sh)
#
# Prints, for each: instructions of one conditional renew against the
# simulated DynamoDB (leaseproof_store_renews, 20,000 minus 10,000 renews,
# divided by 10,000), and of whole runs: the default swarm (seeds 1 and 13),
# 2 minutes of the reference fleet, 1 minute of stream-steady. Takes about
# 3 minutes. Needs valgrind (apt-get install valgrind).
set -euo pipefail

build=${1:-build/release}
cli="$build/src/cli/leaseproof"
renews="$build/bench/leaseproof_store_renews"
for binary in "$cli" "$renews"; do
  if [[ ! -x "$binary" ]]; then
    echo "count-instructions: $binary is missing: build the release preset first (or scripts/build-pgo.sh for build/release-pgo)" >&2
    exit 2
  fi
done
command -v valgrind >/dev/null || { echo "count-instructions: valgrind is not installed" >&2; exit 2; }

instructions() {  # COMMAND...: instructions the command executes
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

small=$(instructions "$renews" 10000)
large=$(instructions "$renews" 20000)
echo "one conditional renew (store): $(( (large - small) / 10000 )) instructions"
while IFS='|' read -r name args; do
  read -r -a argv <<<"$args"
  echo "$name: $(instructions "$cli" run "${argv[@]}") instructions"
done <<'RUNS'
swarm seed 1 (run --seed 1)|--seed 1
swarm seed 13 (run --seed 13)|--seed 13
fleet, 2 minutes (lease-crash)|--seed 1 --scenario lease-crash --duration 2m
stream-steady, 1 minute|--seed 1 --scenario stream-steady --duration 1m
RUNS
