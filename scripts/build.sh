#!/usr/bin/env bash
# scripts/build.sh PRESET [cmake --build args...]: configure (once) and build
# one of the presets in CMakePresets.json (debug, release, asan).
#
# LEASEPROOF_CI=1 (set by .ci/run) configures the Debug tree for CI only:
# no debug information (-g0: about a fifth less compile time; CI runs the
# tests for their assertions, nobody attaches gdb) and no benchmarks (their
# Debug figures mean nothing). A developer's build/debug keeps both. CI
# builds the asan preset instead of Debug (scripts/test.sh), with line
# tables only (-g1).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:?usage: scripts/build.sh debug|release|asan [extra cmake --build args]}
shift
jobs=${LEASEPROOF_JOBS:-$(nproc)}
if [[ ! -f "build/$preset/CMakeCache.txt" ]]; then
  configure=()
  if [[ "${LEASEPROOF_CI:-0}" == 1 && "$preset" == debug ]]; then
    configure=(-DCMAKE_CXX_FLAGS_DEBUG=-g0 -DLEASEPROOF_BUILD_BENCH=OFF)
  fi
  # CI's asan build: line tables only (file:line in a sanitizer's report,
  # less to compile than full debug information).
  if [[ "${LEASEPROOF_CI:-0}" == 1 && "$preset" == asan ]]; then
    configure=("-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1")
  fi
  cmake --preset "$preset" "${configure[@]}" >/dev/null
fi
cmake --build --preset "$preset" -j "$jobs" "$@"
