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
# minutes (lease-crash); stream-steady for 1 simulated minute; and the real
# hub's instructions per delivered Data frame (bench/hub_instructions.py: 500
# subscribers on loopback, 80 minus 20 single publishes, one thread). Runs use
# --inline-checks, so that one thread does everything and the count does not
# depend on how two threads met. About 2.5 minutes on 2 cores. Lowering a
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
    -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
command -v python3 >/dev/null || { echo "count-instructions: python3 is not installed (scripts/setup.sh tests)" >&2; exit 2; }

# budgets MODE [name=count...]: MODE validate reads the budget file and exits 2
# naming what is wrong; check compares the counts with it; update writes it.
budgets() {
  python3 - "$budgets" "$tolerance_percent" "$@" <<'PY'
import json, os, sys
path, tolerance_default, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
counts = {} if mode == "validate" else {n: int(c) for n, c in (a.split("=", 1) for a in sys.argv[4:])}
if mode == "update":
    with open(path + ".tmp", "w") as out:
        json.dump({"tolerance_percent": tolerance_default, "instructions": counts}, out, indent=2)
        out.write("\n")
    os.replace(path + ".tmp", path)
    print(f"count-instructions: wrote {len(counts)} budgets to {path}")
    sys.exit(0)
shape = '{"tolerance_percent": N, "instructions": {"RUN": COUNT, ...}}'
try:
    with open(path) as source:
        data = json.load(source)
except OSError as error:
    print(f"count-instructions: {path}: {error.strerror} (--update writes it)", file=sys.stderr)
    sys.exit(2)
except ValueError as error:
    print(f"count-instructions: {path}: not JSON: {error}", file=sys.stderr)
    sys.exit(2)
tolerance = data.get("tolerance_percent") if isinstance(data, dict) else None
budgets = data.get("instructions") if isinstance(data, dict) else None
if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance <= 100:
    print(f"count-instructions: {path}: tolerance_percent must be a number from 0 to 100 (expected {shape})", file=sys.stderr)
    sys.exit(2)
if not isinstance(budgets, dict):
    print(f"count-instructions: {path}: instructions must be an object of run names to counts (expected {shape})", file=sys.stderr)
    sys.exit(2)
if mode == "validate":
    for name in sys.argv[4:]:
        budget = budgets.get(name)
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            print(f"count-instructions: {path}: instructions.{name} must be a positive integer (--update writes it)", file=sys.stderr)
            sys.exit(2)
    sys.exit(0)
over = 0
for name, count in counts.items():
    budget = budgets[name]
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
}

instructions() {  # COMMAND...: instructions the command executes (it must succeed)
  local count report status=0
  report=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null) || status=$?
  if ((status != 0)); then
    # A run that fails (a renew refused, a run that aborts) measures something else.
    echo "count-instructions: exit status $status from: $*" >&2
    exit 2
  fi
  count=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' <<<"$report")
  if [[ -z $count ]]; then
    echo "count-instructions: valgrind counted nothing for: $*" >&2
    exit 2
  fi
  echo "$count"
}

# name|what it is|leaseproof run arguments (empty: the store's renew; hub:
# bench/hub_instructions.py)
runs=(
  "renew|one conditional renew against the simulated store|"
  "swarm-seed-1|run --seed 1|--seed 1"
  "fleet-6m|the reference fleet, 6 simulated minutes (lease-crash)|--seed 1 --scenario lease-crash --duration 6m"
  'fleet-liveness-6m|the reference fleet with the liveness algorithm, 6 simulated minutes|--seed 1 --scenario lease-crash --duration 6m --params {"algorithm":"liveness"}'
  "stream-steady-1m|stream-steady, 1 simulated minute|--seed 1 --scenario stream-steady --duration 1m"
  'stream-packed-1m|stream-steady recording packed, 1 simulated minute|--seed 1 --scenario stream-steady --duration 1m --params {"stream":{"record_mode":"packed"}}'
  "hub-frame|the real hub, per Data frame delivered to one of 500 subscribers|hub"
)
names=()
for entry in "${runs[@]}"; do names+=("${entry%%|*}"); done
# Refuse a bad budget file before two minutes of counting.
[[ $mode == check ]] && budgets validate "${names[@]}"

counts=()
for entry in "${runs[@]}"; do
  IFS='|' read -r name what args <<<"$entry"
  if [[ -z $args ]]; then
    small=$(instructions "$renews" 10000)
    large=$(instructions "$renews" 20000)
    count=$(((large - small) / 10000))
  elif [[ $args == hub ]]; then
    count=$(python3 bench/hub_instructions.py --binary "$cli") || {
      echo "count-instructions: bench/hub_instructions.py failed" >&2
      exit 2
    }
  else
    read -r -a argv <<<"$args"
    count=$(instructions "$cli" run "${argv[@]}" --inline-checks)
  fi
  counts+=("$name=$count")
  printf '%-18s %15s instructions  (%s)\n' "$name" "$count" "$what"
done

case "$mode" in
  print) ;;
  check | update) budgets "$mode" "${counts[@]}" ;;
esac
