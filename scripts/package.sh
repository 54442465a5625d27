#!/usr/bin/env bash
# scripts/package.sh [OUT_DIR]: builds the Debian package (cmake/Package.cmake)
# from a Release tree of its own, build/package, configured without tests or
# benchmarks: the libraries, leaseproof and leaseproof-runtime, nothing else.
# Writes OUT_DIR/leaseproof_VERSION_ARCH.deb (default build/package/deb) and
# prints its size and the build's wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in
  -h | --help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
out=${1:-build/package/deb}
jobs=${LEASEPROOF_JOBS:-$(nproc)}
scripts/setup.sh
started=$SECONDS
if [[ ! -f build/package/CMakeCache.txt ]]; then
  cmake -S . -B build/package -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLEASEPROOF_BUILD_TESTS=OFF -DLEASEPROOF_BUILD_BENCH=OFF >/dev/null
fi
cmake --build build/package -j "$jobs"
built=$((SECONDS - started))
mkdir -p "$out"
cpack -G DEB --config build/package/CPackConfig.cmake -B "$out" >/dev/null
deb=$(find "$out" -maxdepth 1 -name 'leaseproof_*.deb' | sort | tail -n 1)
[[ -n $deb ]] || { echo "package: cpack wrote no leaseproof_*.deb in $out" >&2; exit 1; }
echo "package: $deb, $(stat -c %s "$deb") bytes; build $built s, package $((SECONDS - started - built)) s"
