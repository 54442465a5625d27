#!/usr/bin/env bash
# Installs the Debian packages leaseproof builds with. Idempotent, and fast
# when everything is already there (one dpkg-query, no apt-get).
#   scripts/setup.sh         build dependencies
#   scripts/setup.sh tests   also what the tests use beyond the build: Chromium,
#                            which checks the sweep's HTML report headless;
#                            valgrind for the instruction budgets
#                            (scripts/count-instructions.sh --check);
#                            python3-websockets, an outside WebSocket client
#                            (tests/real/hub_interop.py); redis-server, the
#                            store two hubs share in the lab (scripts/lab.py);
#                            faketime, a worker with a fast wall clock
#                            (scripts/real_lab.py); python3-yaml, which reads
#                            the sharded-gate manifests (tests/gate/manifests_test.py);
#                            ccache, which CMake uses as the compiler
#                            launcher when present (a second build of the
#                            same sources, in any folder, compiles nothing)
set -euo pipefail

packages=(
  g++ cmake ninja-build git python3
  libboost1.81-dev libboost-system1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  librapidcheck-dev libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev nlohmann-json3-dev libcli11-dev libhiredis-dev libssl-dev
)
if [[ ${1:-} == tests ]]; then
  packages+=(chromium fonts-dejavu-core valgrind python3-websockets redis-server faketime python3-yaml ccache)
elif [[ -n ${1:-} ]]; then
  echo "setup: unknown argument '$1'; expected nothing or 'tests'" >&2
  exit 2
fi

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$package")
done

if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing packages and not root; run as root or install: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: build dependencies present"
