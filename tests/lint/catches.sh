#!/usr/bin/env bash
# The lint scripts can fail: each is given a small tree with one known
# violation and must refuse it naming the file and line, and given the same
# tree without it must pass.
set -uo pipefail
lint=$(cd "$(dirname "$0")" && pwd)
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
failures=0

# expect SCRIPT WANT_STATUS PATTERN: runs the lint on $tree and checks both.
expect() {
  local script=$1 want=$2 pattern=$3 output status
  output=$(bash "$lint/$script" "$tree" 2>&1)
  status=$?
  if [[ $want == fail && $status -eq 0 ]] || [[ $want == pass && $status -ne 0 ]] ||
     ! grep -qE -- "$pattern" <<<"$output"; then
    echo "catches: $script should $want (exit $status, output matching '$pattern'):" >&2
    echo "$output" >&2
    failures=$((failures + 1))
  else
    echo "catches: $script: $want, as expected: $(head -n 1 <<<"$output")"
  fi
}

mkdir -p "$tree/core/lease" "$tree/sim" "$tree/properties"
printf '#include "base/time.hpp"\n#include <fmt/format.h>\n' >"$tree/core/lease/manager.cpp"
printf '#include "base/time.hpp"\n' >"$tree/sim/trace.cpp"
printf '#include "sim/trace.hpp"\n#include "core/lease/config.hpp"\n' >"$tree/properties/checker.cpp"
expect core_is_sans_io.sh pass 'files clean'
expect layers.sh pass 'includes one way'

printf '#include <random>\nauto t = std::chrono::steady_clock::now();\n' >"$tree/core/lease/bad.cpp"
expect core_is_sans_io.sh fail 'core/lease/bad.cpp:1:.*<random>'
rm "$tree/core/lease/bad.cpp"

printf '#include "core/lease/manager.hpp"\n' >"$tree/sim/bad.cpp"
expect layers.sh fail 'sim/bad.cpp:1: sim/ includes "core/lease/manager.hpp"'
rm "$tree/sim/bad.cpp"
printf '#include "sim/trace.hpp"\n#include "models/worker.hpp"\n' >"$tree/properties/bad.cpp"
expect layers.sh fail 'properties/bad.cpp:2: properties/ includes "models/worker.hpp"'
rm "$tree/properties/bad.cpp"
printf '#include "core/resume/hub.hpp"\n' >"$tree/core/lease/bad.hpp"
expect layers.sh fail 'core/lease/bad.hpp:1: core/lease/ includes "core/resume/hub.hpp"'
printf '#include <leaseproof/base/time.hpp>\n' >"$tree/core/lease/bad.hpp"
expect layers.sh fail 'core/lease/bad.hpp:1: include "base/time.hpp", not <leaseproof/base/time.hpp>'

rm "$tree/core/lease/bad.hpp"
mkdir -p "$tree/models/dynamo"
printf '#include "models/worker.hpp"\n' >"$tree/models/dynamo/store.cpp"
expect layers.sh fail 'models/dynamo/store.cpp:1: models/dynamo/ includes "models/worker.hpp"'
printf '#include "core/dynamo/types.hpp"\n#include "sim/world.hpp"\n' >"$tree/models/dynamo/store.cpp"
expect layers.sh pass 'includes one way'
mkdir -p "$tree/core/cache"
printf '#include "base/time.hpp"\n' >"$tree/core/cache/cache.cpp"
expect layers.sh fail 'core/cache/ holds code but has no rule'

exit $((failures > 0))
