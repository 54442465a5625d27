#!/bin/bash
# Compares the trace hashes of two leaseproof binaries over a fixed set of
# runs: the swarm (both expiry modes, both algorithms, without streaming) and
# every named scenario. A change meant to keep behaviour (an optimisation, a
# refactoring) must print no difference.
#
#   cp build/release/cli/leaseproof /tmp/leaseproof.before   # before the change
#   ... change, rebuild ...
#   scripts/compare-builds.sh /tmp/leaseproof.before build/release/cli/leaseproof
#
# Exit 0 when every hash is equal, 1 when one differs, 2 on bad usage.
set -euo pipefail

if [[ $# -ne 2 || ! -x "$1" || ! -x "$2" ]]; then
  echo "usage: $0 OLD_LEASEPROOF NEW_LEASEPROOF (two executable leaseproof binaries)" >&2
  exit 2
fi

runs() {
  for s in 1 2 3 4 5 6 7 8 9 10 11 12; do echo "--seed $s"; done
  for s in 1 2 3 4 5 6; do echo "--seed $s --expiry counter"; echo "--seed $s --algorithm seed"; done
  for s in 1 2 3; do echo "--seed $s --params {\"stream\":{\"enabled\":false}}"; done
  for sc in lease-crash lease-scale lease-throttle lease-lost-replies lease-pause lease-partition lease-skew; do
    echo "--seed 1 --scenario $sc --duration 10m"
  done
  echo "--seed 2 --scenario lease-deploy --duration 25m"
  echo "--seed 1 --scenario stream-steady --duration 1m"
  for sc in stream-cuts stream-hub-restart stream-hub-restart-kept stream-crash-recording stream-slow-subscriber \
            stream-relay-idle stream-silent-subscriber stream-wave stream-empty-reconnect kernel; do
    echo "--seed 1 --scenario $sc"
  done
}

hash_of() {  # BIN ARGS...: the run's trace hash line
  local bin=$1
  shift
  local output
  output=$("$bin" run "$@" 2>&1) || true  # a run that FAILs (exit 1) still has its hash
  grep -E '^trace hash' <<<"$output" || echo "no trace hash (the run failed to start)"
}

differences=0
total=0
while IFS= read -r line; do
  read -r -a args <<<"$line"
  old=$(hash_of "$1" "${args[@]}")
  new=$(hash_of "$2" "${args[@]}")
  total=$((total + 1))
  if [[ "$old" != "$new" ]]; then
    differences=$((differences + 1))
    echo "DIFFERENT  run $line: $old -> $new"
  fi
done < <(runs)
echo "compare-builds: $total runs, $differences with a different trace hash"
[[ $differences -eq 0 ]]
