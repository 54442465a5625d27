#!/usr/bin/env bash
# tests/consumer/run.sh BUILD_DIR [core|colliding]: installs BUILD_DIR's core
# and runtime into a temporary prefix and checks what was installed, then
#   core       configures and builds this folder's project against it with
#              find_package(leaseproof COMPONENTS core) while CMake may find
#              neither Boost nor OpenSSL, checks that it links the lease core
#              alone (no sim, models, runtime or Boost library on its link
#              line) and runs it;
#   colliding  builds and runs colliding/, an application with its own
#              include/base, include/core and include/runtime first on its
#              include path, against the installed runtime.
# The
# install holds the core and the embeddable runtime (embedded_test.py uses
# that), nothing else: the DynamoDB expression language (models/dynamo/) is
# the simulator's, and the servers (hub, relay) are this repository's own.
set -euo pipefail
build=$(cd "${1:?usage: run.sh BUILD_DIR [core|colliding]}" && pwd)
mode=${2:-core}
[[ $mode == core || $mode == colliding ]] || { echo "run.sh: mode '$mode': allowed are core, colliding" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
echo "installed: $(cd "$work/prefix" && find . -type f | sort | sed -n 's|^\./lib/\(.*\.a\)$|\1|p' | tr '\n' ' ')"
unexpected=$(cd "$work/prefix" && find . -type f \( -name '*.a' -o -name '*.so*' \) | grep -vE '/libleaseproof_(base|dynamo|lease|resume|runtime)\.a$' || true)
if [[ -n $unexpected ]]; then
  echo "consumer: the install holds more than the core and the runtime: $unexpected" >&2
  exit 1
fi
headers=$(find "$work/prefix/include/leaseproof" -name '*.hpp' | wc -l)
echo "installed: $headers headers under include/leaseproof"
if find "$work/prefix/include/leaseproof" -path '*/models/*' -o -name 'expression*.hpp' -o -name 'hub_server.hpp' \
    -o -name 'relay.hpp' | grep .; then
  echo "consumer: the install holds the simulated DynamoDB's or the servers' headers (above)" >&2
  exit 1
fi
evaluator=$(nm -C --defined-only "$work/prefix/lib/libleaseproof_dynamo.a" | grep -E 'ExpressionContext|parse_condition|apply_update' || true)
if [[ -n $evaluator ]]; then
  echo "consumer: libleaseproof_dynamo.a defines the expression language:" >&2
  head -n 5 <<<"$evaluator" >&2
  exit 1
fi
echo "installed: no expression parser or evaluator (libleaseproof_dynamo.a: $(stat -c %s "$work/prefix/lib/libleaseproof_dynamo.a") bytes)"
# Installed headers reach each other through leaseproof/ only: an in-tree
# path ("base/time.hpp") would find a file of the including project's.
in_tree=$(grep -rnE '#[[:space:]]*include[[:space:]]*["<](base|core|runtime)/' "$work/prefix/include" || true)
if [[ -n $in_tree ]]; then
  echo "consumer: installed headers include others by their in-tree path:" >&2
  head -n 5 <<<"$in_tree" >&2
  exit 1
fi
echo "installed: every include between installed headers is under leaseproof/"

if [[ $mode == colliding ]]; then
  cmake -S "$here/colliding" -B "$work/colliding" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log" || { cat "$work/configure.log" >&2; exit 1; }
  cmake --build "$work/colliding" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
  "$work/colliding/colliding"
  echo "consumer: an application with its own base/, core/ and runtime/ headers built against the installed runtime"
  exit 0
fi

# The core component looks for neither Boost nor OpenSSL: the configure
# fails if it tries (CMAKE_DISABLE_FIND_PACKAGE_*).
cmake -S "$here" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON \
  -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log" || { cat "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" -v >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
link=$(grep -E -- '-o consumer( |$)' "$work/build.log" | tail -n 1)
echo "link line: ${link#*&& }"
if [[ $link != *libleaseproof_lease.a* ]]; then
  echo "consumer: the link line does not name libleaseproof_lease.a" >&2
  exit 1
fi
if grep -qiE 'leaseproof_(sim|models|properties|scenarios|report|runtime)|boost|asio' <<<"$link"; then
  echo "consumer: the link line names more than the core" >&2
  exit 1
fi

output=$("$work/build/consumer")
echo "$output"
grep -q '^call acquire conn-1: UpdateItem ' <<<"$output" || { echo "consumer: no acquire was sent" >&2; exit 1; }
grep -q '^open conn-1 epoch 7 ' <<<"$output" || { echo "consumer: the session did not open at epoch 7" >&2; exit 1; }
echo "consumer: the installed lease core acquired conn-1"
