#!/usr/bin/env bash
# scripts/build-pgo.sh [--quick]: builds the CLI and the benchmarks with
# profile-guided optimization into build/release-pgo (preset release-pgo).
#
#   1. configure build/release-pgo with LEASEPROOF_PGO=generate and build an
#      instrumented leaseproof;
#   2. train it: the reference fleet, a streaming fleet, swarm seeds in both
#      expiry modes, the articles' algorithm and a rolling deploy (profiles
#      go to build/release-pgo/pgo-profile; old ones are removed first, as
#      GCC refuses profiles of another source version);
#   3. configure the same directory with LEASEPROOF_PGO=use and build
#      leaseproof and the benchmarks (leaseproof_bench, leaseproof_store_renews)
#      again.
#
# --quick trains on shorter runs (for CI, which checks that the result gives
# the plain Release build's trace hashes, not its speed).
#
# The result: build/release-pgo/cli/leaseproof. It must give every trace
# hash the plain Release build gives (scripts/compare-builds.sh); PGO changes
# how fast, never what. docs/benchmarks.md has the measured difference.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
case "${1:-}" in
  "") ;;
  --quick) quick=true ;;
  -h | --help)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "build-pgo.sh: unknown argument '$1' (allowed: --quick, --help)" >&2
    exit 2
    ;;
esac

dir=build/release-pgo
profiles=$dir/pgo-profile
jobs=${LEASEPROOF_JOBS:-$(nproc)}

echo "== build-pgo: instrumented build ($dir, LEASEPROOF_PGO=generate)"
cmake --preset release-pgo -DLEASEPROOF_PGO=generate -DLEASEPROOF_PGO_DIR="$PWD/$profiles" >/dev/null
cmake --build "$dir" -j "$jobs" --target leaseproof

echo "== build-pgo: training"
rm -rf "$profiles"
cli=$dir/cli/leaseproof
if $quick; then fleet=2m stream=30s seeds=3 deploy=12m; else fleet=20m stream=2m seeds=8 deploy=25m; fi
train() {  # a run's verdict does not matter here (the articles' algorithm fails), a usage error does
  echo "   leaseproof run $*"
  local status=0
  "$cli" run "$@" >/dev/null || status=$?
  if ((status > 1)); then
    echo "build-pgo.sh: training run failed (exit $status): leaseproof run $*" >&2
    exit 1
  fi
}
train --seed 1 --scenario lease-crash --duration "$fleet"
train --seed 1 --scenario stream-steady --duration "$stream"
train --seed 2 --scenario lease-deploy --duration "$deploy"
for ((seed = 1; seed <= seeds; seed++)); do
  train --seed "$seed"
  train --seed "$seed" --expiry counter
  train --seed "$seed" --algorithm seed
done
if [[ ! -d "$profiles" ]]; then
  echo "build-pgo.sh: the training wrote no profiles to $profiles" >&2
  exit 1
fi

echo "== build-pgo: optimized build (LEASEPROOF_PGO=use)"
cmake --preset release-pgo -DLEASEPROOF_PGO=use -DLEASEPROOF_PGO_DIR="$PWD/$profiles" >/dev/null
cmake --build --preset release-pgo -j "$jobs"
echo "build-pgo: built $cli, $dir/bench/leaseproof_bench and $dir/bench/leaseproof_store_renews"
