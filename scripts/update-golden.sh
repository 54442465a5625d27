#!/usr/bin/env bash
# Regenerates tests/golden/kernel-trace-hashes.txt from the current code. Run it
# only when a change to the trace is intended (a new event, a changed model),
# and say why in the commit message: the golden test exists to catch changes
# nobody meant to make.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh release --target leaseproof >/dev/null
binary=build/release/cli/leaseproof
golden=tests/golden/kernel-trace-hashes.txt
temporary=$(mktemp)
{
  echo "# seed duration trace-hash (kernel scenario); regenerate on purpose with scripts/update-golden.sh"
  for spec in "1..5 10m0s" "42..42 1h0m0s"; do
    read -r seeds duration <<<"$spec"
    "$binary" check-determinism --scenario kernel --seeds "$seeds" --duration "$duration" --print-hashes |
      awk -v d="$duration" '$1 == "seed" { print $2, d, $4 }'
  done
} >"$temporary"
mv "$temporary" "$golden"
cat "$golden"
