#!/usr/bin/env bash
# core/ is sans-IO and deterministic (DESIGN.md section 2): no clock reads, no
# standard random engines, no threads, no Asio, no files, sockets or
# environment. Exits non-zero naming every offending line.
set -euo pipefail
root=${1:?usage: core_is_sans_io.sh SOURCE_ROOT}
dirs=()
[[ -d "$root/core" ]] && dirs+=("$root/core")
if ((${#dirs[@]} == 0)); then
  echo "core_is_sans_io: no core/ sources under $root" >&2
  exit 1
fi
forbidden='_clock::now|std::chrono::(system|steady|high_resolution)_clock|#include <(random|thread|fstream|iostream|cstdio|future|mutex|filesystem)>|std::(thread|mt19937|random_device|rand\b|srand)|\brand\(|\btime\(NULL|\btime\(nullptr|boost/asio|boost/beast|\bgetenv\b|\bfopen\b|std::(cout|cerr)|\bprintf\('
if hits=$(grep -rnE "$forbidden" "${dirs[@]}"); then
  echo "core_is_sans_io: forbidden names in core/:" >&2
  echo "$hits" >&2
  exit 1
fi
files=$(find "${dirs[@]}" -name '*.cpp' -o -name '*.hpp' | wc -l)
echo "core_is_sans_io: $files files clean"
