#!/usr/bin/env bash
# Includes point one way (DESIGN.md section 2): each layer includes only
# itself and the layers it is allowed to build on, by the path from the
# repository root ("core/lease/manager.hpp"). sim/ knows nothing of leases (no
# core/), properties/ read the trace and never model internals (no models/),
# core/ is the production library and sees only base/, and models/dynamo/
# (the simulated DynamoDB: its expression language and store) knows nothing
# of the other models. Exits non-zero naming every offending include, and
# every folder of code that no rule names.
set -euo pipefail
root=${1:?usage: layers.sh SOURCE_ROOT}

# layer: the folders it may include (itself is always allowed).
declare -A allowed=(
  [base]=""
  [core/dynamo]="base"
  [core/lease]="base core/dynamo"
  [core/resume]="base core/dynamo core/lease"
  [core/registry]="base core/dynamo"
  [sim]="base"
  [models/dynamo]="base core/dynamo sim"
  [models]="base core sim"
  [properties]="base core sim"
  [runtime]="base core"
  [runtime/aws]="base core runtime"
  [runtime/hub]="base core runtime runtime/aws"
  [runtime/worker]="base core runtime runtime/aws runtime/hub"
  [scenarios]="base core sim models properties"
  [reports]="base core sim models properties scenarios"
  [cli]="base core sim models properties runtime runtime/aws runtime/worker runtime/hub scenarios reports"
)
# Layers that do not own the folders below them: runtime/ is its three rooms'
# shared headers (clock, randomness, Prometheus text), and a rule naming
# "runtime" allows those headers only, not the rooms.
declare -A exact=([runtime]=1)
# Every folder that holds code must be a known layer (or tests/ and bench/,
# which may include anything): a new top-level folder needs a rule here.
layer_names=" ${!allowed[*]} core "
# The folder an included path names: the deepest layer holding it
# ("core/lease/manager.hpp" -> core/lease, "models/dynamo/store.hpp" ->
# models/dynamo), else its top folder.
# Sets `folder` (no subshell: this runs for every include of every file).
folder_of() {
  local directory=${1%/*}
  while [[ $directory == */* || -n ${allowed[$directory]+set} ]]; do
    if [[ -n ${allowed[$directory]+set} ]]; then
      folder=$directory
      return
    fi
    directory=${directory%/*}
  done
  folder=${1%%/*}
}
# allows LAYER FOLDER: whether LAYER may include from FOLDER.
allows() {
  local layer=$1 folder=$2 entry
  for entry in "$layer" ${allowed[$layer]}; do
    [[ $folder == "$entry" ]] && return 0
    [[ -z ${exact[$entry]+set} && $folder == "$entry"/* ]] && return 0
  done
  return 1
}

violations=0
files=0
include_pattern='^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]([^">]*)[">]'
# A folder of code that no rule names would go unchecked.
for top in base core sim models properties runtime scenarios reports cli; do
  [[ -d $root/$top ]] || continue
  while IFS= read -r directory; do
    directory=${directory#"$root"/}
    if [[ -z ${allowed[$directory]+set} ]]; then
      echo "layers: $directory/ holds code but has no rule in tests/lint/layers.sh" >&2
      violations=$((violations + 1))
    fi
  done < <(find "$root/$top" -type f \( -name '*.cpp' -o -name '*.hpp' \) -printf '%h\n' | sort -u)
done
for layer in "${!allowed[@]}"; do
  [[ -d $root/$layer ]] || continue
  while IFS= read -r -d '' file; do
    files=$((files + 1))
    while IFS=: read -r line text; do
      [[ $text =~ $include_pattern ]] || continue
      included=${BASH_REMATCH[1]}
      if [[ $included == leaseproof/* ]]; then
        echo "layers: ${file#"$root"/}:$line: include \"${included#leaseproof/}\", not <$included> (in-tree code includes by the path from the repository root)" >&2
        violations=$((violations + 1))
        continue
      fi
      [[ $included == */* ]] || continue  # standard or third-party header
      folder_of "$included"
      [[ $layer_names == *" ${folder%%/*} "* ]] || continue  # e.g. <fmt/format.h>
      if ! allows "$layer" "$folder"; then
        echo "layers: ${file#"$root"/}:$line: $layer/ includes \"$included\" ($folder/ is not below $layer/; allowed: ${allowed[$layer]:-nothing})" >&2
        violations=$((violations + 1))
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include' "$file" || true)
  done < <(find "$root/$layer" -maxdepth 1 -type f \( -name '*.cpp' -o -name '*.hpp' \) -print0)
done
if ((files == 0)); then
  echo "layers: no layer sources under $root" >&2
  exit 1
fi
if ((violations > 0)); then
  echo "layers: $violations include(s) against the layer order" >&2
  exit 1
fi
echo "layers: $files files, includes one way"
