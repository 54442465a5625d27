#!/usr/bin/env bash
# scripts/build.sh PRESET [cmake --build args...]: configure (once) and build
# one of the presets in CMakePresets.json (debug, release, asan).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:?usage: scripts/build.sh debug|release|asan [extra cmake --build args]}
shift
jobs=${LEASEPROOF_JOBS:-$(nproc)}
if [[ ! -f "build/$preset/CMakeCache.txt" ]]; then
  cmake --preset "$preset" >/dev/null
fi
cmake --build --preset "$preset" -j "$jobs" "$@"
