#!/usr/bin/env bash
# The lint scripts can fail: each is given a small tree with one known
# violation and must refuse it naming the file and line, and given the same
# tree without it must pass.
set -uo pipefail
lint=$(cd "$(dirname "$0")" && pwd)
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
failures=0

# expect SCRIPT WANT_STATUS PATTERN [ARGS...]: runs the lint on ARGS (default:
# $tree) and checks both.
expect() {
  local script=$1 want=$2 pattern=$3 output status
  shift 3
  (($# > 0)) || set -- "$tree"
  output=$(bash "$lint/$script" "$@" 2>&1)
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

# function_length.sh: a function one line over the limit is refused by name
# and line, one at the limit passes; braces in strings, comments and a
# class's members are not functions of their own.
# long_function NAME BODY_LINES: a function spanning BODY_LINES + 3 lines.
long_function() {
  printf 'int %s(int x) {\n' "$1"
  for ((i = 0; i < $2; ++i)); do printf '  x += %d;  // }\n' "$i"; done
  printf '  return x;\n}\n'
}
mkdir -p "$tree/cli"
{
  printf 'namespace leaseproof::cli {\nnamespace {\nconst char* kBrace = "}";\n'
  printf 'struct Holder {\n  int get() const { return 1; }\n};\n'
  long_function short_enough 7
  printf '}  // namespace\n'
} >"$tree/cli/command.cpp"
long_function fits 7 >>"$tree/cli/command.cpp"
printf '}\n' >>"$tree/cli/command.cpp"
expect function_length.sh pass 'none over 10 lines' "$tree" 10 cli
long_function too_long 8 >"$tree/cli/long.cpp"
expect function_length.sh fail 'cli/long.cpp:1: too_long is 11 lines \(at most 10\)' "$tree" 10 cli
rm "$tree/cli/long.cpp"

exit $((failures > 0))
