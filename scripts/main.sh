#!/usr/bin/env bash
# The main job: install what is needed, build the release binary, and run one
# seeded simulation that prints its verdict, trace hash and reproduce line.
#   scripts/main.sh                       # leaseproof run --seed 1
#   scripts/main.sh --seed 7 --duration 1h  # any 'leaseproof run' flags
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release --target leaseproof >/dev/null
if (($# == 0)); then set -- --seed 1; fi
exec build/release/cli/leaseproof run "$@"
