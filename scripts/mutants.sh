#!/usr/bin/env bash
# scripts/mutants.sh: the mutant zoo (tests/mutants/, docs/mutants.md). Each
# mutant is a plausible one-line bug in core/, kept as a patch whose first line
# says what it breaks. For each one: apply it to the source tree, rebuild the
# CLI incrementally, run the gate (the simulation alone: no unit test counts)
# with a fixed seed budget in both expiry modes, note whether it was caught,
# by which seed and which property, and take the patch back out. Then the
# unmutated CLI is rebuilt. A table is printed; the exit status is 1 when a
# mutant survived that is not a known survivor (a "survives:" line saying
# why), 2 on bad arguments or a tree it cannot safely patch.
#
#   scripts/mutants.sh [--build DIR] [--seeds N] [--all | --rotate K | NAME...]
#
#   --build DIR   a configured build directory (default: build/release)
#   --seeds N     new gate seeds per expiry mode (default: 200); a mutant's
#                 own "gate:" line may set its scenario and seeds
#   --all         every mutant (the default when no NAME is given)
#   --rotate K    K of the mutants the simulation catches (no "survives:"
#                 line), chosen by the day of the year (CI: the whole set over
#                 a few days)
#   NAME...       these mutants (file names without .patch)
#
# The patch is applied in place (an incremental rebuild, not a second build
# tree) and always taken out again, also on failure or Ctrl-C; files a patch
# touches must have no uncommitted changes.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
build=build/release
seeds=200
rotate=0
names=()
usage() { echo "usage: scripts/mutants.sh [--build DIR] [--seeds N] [--all | --rotate K | NAME...]" >&2; exit 2; }
while (($#)); do
  case $1 in
    --build) build=${2:?}; shift 2 ;;
    --seeds) seeds=${2:?}; shift 2 ;;
    --all) shift ;;
    --rotate) rotate=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "mutants.sh: unknown option $1" >&2; usage ;;
    *) names+=("$1"); shift ;;
  esac
done
[[ $seeds =~ ^[0-9]+$ && $seeds -ge 1 && $seeds -le 100000 ]] || { echo "mutants.sh: --seeds: expected 1..100000" >&2; exit 2; }
[[ $rotate =~ ^[0-9]+$ ]] || { echo "mutants.sh: --rotate: expected a count" >&2; exit 2; }
[[ -f $build/build.ninja || -f $build/Makefile ]] || { echo "mutants.sh: --build: '$build' is not a configured build directory" >&2; exit 2; }

# A patch with a "survives:" line is a known survivor: a gap of the harness,
# said in docs/mutants.md. It does not fail the run; the rotation skips it.
all=()
caught_today=()
for patch in tests/mutants/*.patch; do
  all+=("$(basename "$patch" .patch)")
  grep -q '^survives: ' "$patch" || caught_today+=("$(basename "$patch" .patch)")
done
if ((${#names[@]} == 0)); then
  names=("${all[@]}")
  if ((rotate > 0)); then
    pool=("${caught_today[@]}")
    ((rotate <= ${#pool[@]})) || rotate=${#pool[@]}
    start=$(( (10#$(date -u +%j) * rotate) % ${#pool[@]} ))
    names=()
    for ((i = 0; i < rotate; ++i)); do names+=("${pool[(start + i) % ${#pool[@]}]}"); done
  fi
fi
for name in "${names[@]}"; do
  [[ -f tests/mutants/$name.patch ]] || { echo "mutants.sh: no mutant '$name' (tests/mutants/$name.patch)" >&2; exit 2; }
done

cli=$build/cli/leaseproof
applied=""
restore() {
  if [[ -n $applied ]]; then
    git apply -R "tests/mutants/$applied.patch" || echo "mutants.sh: could not take $applied out: check 'git diff core/'" >&2
    applied=""
  fi
}
trap 'restore; cmake --build "$build" --target leaseproof >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM

rebuild() {
  local log
  log=$(mktemp)
  if ! cmake --build "$build" --target leaseproof >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

# One gate run: prints "caught <seed> <property>" or "survived".
gate() {
  local args=$1 expiry=$2 out
  local mode=()
  [[ $expiry == - ]] || mode=(--expiry "$expiry")
  # shellcheck disable=SC2086 # the mutant's own gate arguments, split on purpose
  local count=(--seeds "$seeds")
  [[ " $args " != *" --seeds "* ]] || count=()  # the mutant's own seed count
  out=$("$cli" gate "${count[@]}" --no-record --regressions /dev/null "${mode[@]}" $args 2>&1) && {
    echo survived
    return
  }
  # "new seed 24: FAIL (exactly-once (liveness)): ...": the first failing seed and its property.
  local line seed property
  line=$(grep -m 1 -E '^new seed [0-9]+: FAIL \(' <<<"$out" || true)
  [[ -n $line ]] || { echo "error $(tail -n 2 <<<"$out" | tr '\n' ' ')"; return; }
  seed=${line#new seed }
  seed=${seed%%:*}
  property=${line#*FAIL (}
  property=${property%%): *}
  echo "caught ${seed} ${property}"
}

printf '%-26s %-9s %-8s %-8s %s\n' mutant verdict mode seed "property (and what the mutant breaks)"
survived=0
for name in "${names[@]}"; do
  patch=tests/mutants/$name.patch
  breaks=$(sed -n 's/^breaks: //p' "$patch" | head -n 1)
  known=$(sed -n 's/^survives: //p' "$patch" | head -n 1)
  args=$(sed -n 's/^gate: //p' "$patch" | head -n 1)
  files=$(grep -E '^\+\+\+ b/' "$patch" | sed 's|^+++ b/||')
  # shellcheck disable=SC2086
  if ! git diff --quiet -- $files; then
    echo "mutants.sh: $files has uncommitted changes; commit or stash them first" >&2
    exit 2
  fi
  git apply "$patch"
  applied=$name
  started=$SECONDS
  if ! rebuild; then
    echo "mutants.sh: $name does not build" >&2
    exit 2
  fi
  verdict=survived mode=- seed=- property=-
  modes=(wall counter)
  [[ -z $args ]] || modes=(-)  # a mutant with its own scenario: that scenario's gate, once
  for expiry in "${modes[@]}"; do
    result=$(gate "$args" "$expiry")
    case $result in
      caught*) read -r verdict seed property <<<"$result"; mode=$expiry; property=${result#caught $seed }; break ;;
      error*) echo "mutants.sh: $name: the gate did not run: ${result#error }" >&2; exit 2 ;;
    esac
  done
  restore
  if [[ $verdict != caught && -n $known ]]; then
    verdict=known
    property="survives: $known"
  elif [[ $verdict == caught && -n $known ]]; then
    property="$property; a known survivor now caught: remove its survives: line and update docs/mutants.md"
  elif [[ $verdict != caught ]]; then
    survived=$((survived + 1))
  fi
  printf '%-26s %-9s %-8s %-8s %s (%s; %d s)\n' "$name" "$verdict" "$mode" "$seed" "$property" "$breaks" $((SECONDS - started))
done
echo "mutants: ${#names[@]} run, $survived survived that should not (known survivors: docs/mutants.md; gate: $seeds seeds per expiry mode)"
((survived == 0))
