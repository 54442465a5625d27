#!/usr/bin/env bash
# Instruction counts (valgrind --tool=callgrind: deterministic for one build,
# unlike wall time on a shared machine) of the runs leaseproof's speed is
# stated in, and the check that holds them to bench/instruction-budgets.json.
#
#   scripts/count-instructions.sh [BUILD]           # print the counts (default build/release)
#   scripts/count-instructions.sh --check [BUILD]   # fail if a run is over its budget by > 2%
#   scripts/count-instructions.sh --update [BUILD]  # write the counts as the new budgets
#   scripts/count-instructions.sh /tmp/other/build/release   # another commit, side by side
#
# The runs: one conditional renew against the simulated DynamoDB
# (leaseproof_store_renews: 20,000 minus 10,000 renews, over 10,000); the
# default swarm run (run --seed 1); the reference fleet for 6 simulated
# minutes (lease-crash); stream-steady for 1 simulated minute. Runs use
# --inline-checks, so that one thread does everything and the count does not
# depend on how two threads met. About 2 minutes on 2 cores. Lowering a
# budget is an ordinary commit; raising one needs a sentence in the commit
# message saying why. Exit 0: all within budget (or counted); 1: a run over
# budget; 2: bad usage, missing binaries or valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=print
build=build/release
budgets=bench/instruction-budgets.json
tolerance_percent=2
for argument in "$@"; do
  case "$argument" in
    --check) mode=check ;;
    --update) mode=update ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "count-instructions: unknown option '$argument' (allowed: --check, --update, --help)" >&2; exit 2 ;;
    *) build=$argument ;;
  esac
done

cli="$build/cli/leaseproof"
renews="$build/bench/leaseproof_store_renews"
for binary in "$cli" "$renews"; do
  if [[ ! -x "$binary" ]]; then
    echo "count-instructions: $binary is missing: build the release preset first (scripts/build.sh release)" >&2
    exit 2
  fi
done
command -v valgrind >/dev/null || { echo "count-instructions: valgrind is not installed (scripts/setup.sh tests)" >&2; exit 2; }
if [[ $mode == check && ! -f $budgets ]]; then
  echo "count-instructions: $budgets is missing (--update writes it)" >&2
  exit 2
fi

instructions() {  # COMMAND...: instructions the command executes
  local count
  count=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
          sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
  if [[ -z $count ]]; then
    echo "count-instructions: valgrind counted nothing for: $*" >&2
    exit 2
  fi
  echo "$count"
}

# name|what it is|leaseproof run arguments (empty: the store's renew)
runs=(
  "renew|one conditional renew against the simulated store|"
  "swarm-seed-1|run --seed 1|--seed 1"
  "fleet-6m|the reference fleet, 6 simulated minutes (lease-crash)|--seed 1 --scenario lease-crash --duration 6m"
  "stream-steady-1m|stream-steady, 1 simulated minute|--seed 1 --scenario stream-steady --duration 1m"
)

counts=()
for entry in "${runs[@]}"; do
  IFS='|' read -r name what args <<<"$entry"
  if [[ -z $args ]]; then
    small=$(instructions "$renews" 10000)
    large=$(instructions "$renews" 20000)
    count=$(((large - small) / 10000))
  else
    read -r -a argv <<<"$args"
    count=$(instructions "$cli" run "${argv[@]}" --inline-checks)
  fi
  counts+=("$name=$count")
  printf '%-18s %15s instructions  (%s)\n' "$name" "$count" "$what"
done

case "$mode" in
  print) ;;
  update)
    python3 - "$budgets" "$tolerance_percent" "${counts[@]}" <<'PY'
import json, sys
path, tolerance = sys.argv[1], int(sys.argv[2])
runs = {name: int(count) for name, count in (a.split("=", 1) for a in sys.argv[3:])}
with open(path + ".tmp", "w") as out:
    json.dump({"tolerance_percent": tolerance, "instructions": runs}, out, indent=2)
    out.write("\n")
import os
os.replace(path + ".tmp", path)
print(f"count-instructions: wrote {len(runs)} budgets to {path}")
PY
    ;;
  check)
    python3 - "$budgets" "${counts[@]}" <<'PY'
import json, sys
path = sys.argv[1]
try:
    data = json.load(open(path))
    tolerance = data["tolerance_percent"]
    budgets = data["instructions"]
    if not isinstance(tolerance, (int, float)) or not 0 <= tolerance <= 100:
        raise ValueError("tolerance_percent must be a number from 0 to 100")
except (OSError, ValueError, KeyError, TypeError) as error:
    print(f"count-instructions: {path}: {error} (expected {{\"tolerance_percent\": N, \"instructions\": {{run: count}}}})", file=sys.stderr)
    sys.exit(2)
over = 0
for name, count in (a.split("=", 1) for a in sys.argv[2:]):
    count = int(count)
    budget = budgets.get(name)
    if not isinstance(budget, int) or budget <= 0:
        print(f"count-instructions: {path} has no budget for run '{name}' (--update writes one)", file=sys.stderr)
        sys.exit(2)
    change = 100.0 * (count - budget) / budget
    verdict = "ok"
    if count > budget * (1 + tolerance / 100):
        verdict = f"OVER BUDGET by more than {tolerance}%"
        over += 1
    print(f"{name}: {count:,} instructions, budget {budget:,} ({change:+.2f}%): {verdict}")
if over:
    print(f"count-instructions: {over} run(s) over budget; a slower build needs a reason to raise its budget "
          f"(scripts/count-instructions.sh --update, and say why in the commit message)", file=sys.stderr)
    sys.exit(1)
print(f"count-instructions: every run within {tolerance}% of its budget")
PY
    ;;
esac
