#!/usr/bin/env bash
# tests/package/deb_test.sh BUILD_DIR: builds the Debian package from a
# configured Release tree (cpack -G DEB, cmake/Package.cmake), then checks it
# as a machine that installs it would see it:
#   - its Depends name the shared libraries the binary links (OpenSSL, fmt,
#     Boost.URL, hiredis), each a package this Debian can install, and the
#     package installs together with its Suggests (apt-get install -s);
#   - extracted, the binary finds every library (ldd) and runs: a simulation
#     from the package gives the build tree's trace hash (same code, stripped);
#   - the core's library, headers and CMake package are in it.
set -euo pipefail
build=$(cd "${1:?usage: deb_test.sh BUILD_DIR}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1 || {
  cat "$work/cpack.log" >&2
  exit 1
}
deb=$(find "$work/out" -maxdepth 1 -name 'leaseproof_*.deb' | head -n 1)
[[ -n $deb ]] || { echo "deb_test: cpack wrote no leaseproof_*.deb" >&2; exit 1; }
echo "package: $(basename "$deb"), $(stat -c %s "$deb") bytes"

depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
names=" $(tr ',' '\n' <<<"$depends" | sed -E 's/^ *([^ ]+).*/\1/' | tr '\n' ' ')"
for needed in libssl3 libfmt9 libboost-url1.81.0 libhiredis0.14 libstdc++6; do
  [[ $names == *" $needed "* ]] || { echo "deb_test: Depends lacks $needed" >&2; exit 1; }
done
# What `apt-get install ./leaseproof_*.deb` (deploy/Dockerfile) would fetch:
# every dependency must be a package this Debian knows.
while read -r name; do
  candidate=$(apt-cache policy "$name" 2>/dev/null | sed -n 's/^ *Candidate: //p')
  if [[ -z $candidate || $candidate == "(none)" ]]; then
    echo "deb_test: dependency $name has no installable version here (apt-cache policy)" >&2
    exit 1
  fi
done < <(tr ' ' '\n' <<<"$names" | sed '/^$/d')
# The package with everything it suggests (what a project building against
# the installed core and runtime adds) installs together on this Debian.
suggests=$(dpkg-deb -f "$deb" Suggests)
echo "Suggests: $suggests"
mapfile -t suggested < <(tr ',' '\n' <<<"$suggests" | sed -E 's/^ *([^ ]+).*/\1/' | sed '/^$/d')
if ! apt-get install -s "$deb" "${suggested[@]}" >"$work/apt.log" 2>&1; then
  tail -n 15 "$work/apt.log" >&2
  echo "deb_test: apt-get install -s of the package and its Suggests fails (above)" >&2
  exit 1
fi
echo "deb_test: apt-get install -s of the package with its Suggests: $(grep -c '^Inst ' "$work/apt.log") packages to install, no conflict"

dpkg-deb -x "$deb" "$work/root"
binary=$work/root/usr/bin/leaseproof
[[ -x $binary ]] || { echo "deb_test: no usr/bin/leaseproof in the package" >&2; exit 1; }
if ldd "$binary" "$work/root/usr/bin/leaseproof-runtime" | grep -q 'not found'; then
  ldd "$binary" "$work/root/usr/bin/leaseproof-runtime" >&2
  echo "deb_test: the packaged binary misses a library" >&2
  exit 1
fi
for file in usr/bin/leaseproof-runtime usr/lib/libleaseproof_lease.a usr/include/leaseproof/core/lease/manager.hpp \
            usr/lib/cmake/leaseproof/leaseproofConfig.cmake; do
  [[ -e $work/root/$file ]] || { echo "deb_test: $file is not in the package" >&2; exit 1; }
done

packaged=$("$binary" run --seed 7 --duration 2m | sed -n 's/^trace hash: //p')
built=$("$build/cli/leaseproof" run --seed 7 --duration 2m | sed -n 's/^trace hash: //p')
if [[ -z $packaged || $packaged != "$built" ]]; then
  echo "deb_test: the packaged binary's trace hash '$packaged' differs from the build's '$built'" >&2
  exit 1
fi
echo "deb_test: extracted and ran: seed 7 trace hash $packaged, as the build tree's"
