#!/usr/bin/env bash
# `leaseproof sweep` and `report merge` end to end, as docs/reports.md shows
# them: bad input gets exit status 2, a message naming the field or flag,
# and nothing written; three shards merged equal the unsharded reports byte
# for byte; the repository's specs are valid.
# Usage: cli_sweep_test.sh LEASEPROOF_BINARY SOURCE_DIR errors|merge|specs
set -u
bin=$1
source_dir=$2
case_name=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
spec=$source_dir/sweeps/fast-worker.json

# expect_usage_error NAME EXPECTED_STDERR_PART ARGS...: exit 2, the message, no --out directory.
expect_usage_error() {
  local name=$1 expected=$2
  shift 2
  "$bin" "$@" > "$dir/out.txt" 2> "$dir/err.txt"
  local status=$?
  [ $status -eq 2 ] || fail "$name: exit status $status, expected 2 ($(cat "$dir/err.txt"))"
  grep -qF -- "$expected" "$dir/err.txt" || fail "$name: unclear error: $(cat "$dir/err.txt")"
  [ ! -e "$dir/reports" ] || fail "$name: something was written"
}

# A copy of the quick spec with one change (a Python expression on d).
spec_with() {
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); exec(sys.argv[2]); json.dump(d, open(sys.argv[3], 'w'))" \
    "$spec" "$1" "$dir/bad.json"
}

case $case_name in
  errors)
    spec_with "d['axes'][1]['values'] = []"
    expect_usage_error "empty grid" "spec axes[1] (fast_worker_offset): no values: the grid would be empty" \
      sweep --spec "$dir/bad.json" --out "$dir/reports"
    spec_with "d['axes'][0]['values'] = ['core', 'liveness', 'core']"
    expect_usage_error "duplicate value" "spec axes[0] (algorithm).values[2]: \"core\" is given twice (also values[0])" \
      sweep --spec "$dir/bad.json" --out "$dir/reports"
    spec_with "d['axes'][0]['values'] = ['core', 5]"
    expect_usage_error "wrong type" "spec axes[0] (algorithm).values[1]: algorithm: expected \"core\", \"liveness\" or \"seed\", got 5" \
      sweep --spec "$dir/bad.json" --out "$dir/reports"
    # A grid whose every cell is invalid measures nothing: refused, naming why
    # (it used to exit 0, recommending nothing because "no configuration met
    # the recovery target").
    spec_with "d['axes'] = [{'name': 'heartbeat', 'values': ['30s']}]"
    expect_usage_error "every cell invalid" "every cell of the grid is invalid, so the sweep would measure nothing; the first (heartbeat=30s): lease.heartbeat_interval (30s) must be shorter than lease.lease_duration (20s)" \
      sweep --spec "$dir/bad.json" --out "$dir/reports"
    spec_with "d['seed_count'] = 3"
    expect_usage_error "unknown field" "spec seed_count: unknown field" sweep --spec "$dir/bad.json" --out "$dir/reports"
    spec_with "d['prices'] = [{'preset': 'articles', 'on_demand_read_per_million': -0.25}]"
    expect_usage_error "negative price" "spec prices[0].on_demand_read_per_million: -0.25 is below zero" \
      sweep --spec "$dir/bad.json" --out "$dir/reports"
    spec_with "d['seeds'] = 0"
    expect_usage_error "seeds 0 (spec)" "spec seeds: expected an integer in 1.." sweep --spec "$dir/bad.json" --out "$dir/reports"
    expect_usage_error "seeds 0 (flag)" "--seeds: 0: a cell needs at least 1 seed" sweep --spec "$spec" --seeds 0 --out "$dir/reports"
    spec_with "d['scenario'] = 'lease-crush'"
    expect_usage_error "unknown scenario" "spec scenario: unknown scenario 'lease-crush'" sweep --spec "$dir/bad.json" --out "$dir/reports"
    expect_usage_error "shard 3/2" "--shard: '3/2': the index i must be between 1 and n (2)" \
      sweep --spec "$spec" --shard 3/2 --out "$dir/reports"
    expect_usage_error "shard 0/2" "--shard: '0/2': the index i must be between 1 and n (2)" \
      sweep --spec "$spec" --shard 0/2 --out "$dir/reports"
    expect_usage_error "missing spec" "--spec: cannot read '$dir/none.json'" sweep --spec "$dir/none.json" --out "$dir/reports"
    # Outputs are checked before the work: a directory that cannot be made.
    expect_usage_error "unwritable out" "--out: cannot create '/proc/leaseproof-out/x'" \
      sweep --spec "$spec" --out /proc/leaseproof-out/x
    printf '{"scenario": "lease-steady", "scenario": "lease-crash"}' >"$dir/dup.json"
    expect_usage_error "duplicate key" "the key \"scenario\" appears twice in one object" \
      sweep --spec "$dir/dup.json" --out "$dir/reports"
    expect_usage_error "missing shard directory" "report merge: shard directory '$dir/nowhere' does not exist" \
      report merge --out "$dir/reports" "$dir/nowhere"
    mkdir -p "$dir/empty"
    expect_usage_error "missing report file" "report merge: '$dir/empty/sweep.json' is missing" \
      report merge --out "$dir/reports" "$dir/empty"
    "$bin" sweep --spec "$spec" --shard 1/2 --out "$dir/one" > /dev/null || fail "shard 1/2 failed"
    expect_usage_error "missing shard" "report merge: missing shard(s) 2/2" report merge --out "$dir/reports" "$dir/one"
    ;;
  merge)
    "$bin" sweep --spec "$spec" --out "$dir/whole" > "$dir/whole.out" || fail "the sweep failed: $(cat "$dir/whole.out")"
    grep -q '^progress: cells 4/4, runs 24/24' "$dir/whole.out" || fail "no plain progress line when not a terminal"
    grep -q '^recommendation: Recommended: algorithm=core\.' "$dir/whole.out" || fail "no recommendation printed"
    # Every crash gap of the core's cells was judged by the watcher's bound:
    # the recommendation quotes that bound, not the sweep's.
    grep -q "(bound the watcher's [0-9.]* s, which judged every gap, target 1m30s)" "$dir/whole.out" ||
      fail "the recommendation does not quote the watcher's bound: $(grep '^recommendation' "$dir/whole.out")"
    grep -q '^smallest unsafe fast_worker_offset \[algorithm=seed\]: 16s' "$dir/whole.out" || fail "no smallest unsafe skew"
    for i in 1 2 3; do
      "$bin" sweep --spec "$spec" --shard $i/3 --jobs 1 --out "$dir/shard$i" > /dev/null || fail "shard $i/3 failed"
      [ "$(ls -A "$dir/shard$i")" = "sweep.json" ] || fail "shard $i/3 wrote more than its sweep.json: $(ls -A "$dir/shard$i")"
    done
    "$bin" report merge --out "$dir/merged" "$dir/shard2" "$dir/shard3" "$dir/shard1" > /dev/null || fail "merge failed"
    for f in sweep.json sweep.csv sweep.md sweep.html; do
      [ -s "$dir/whole/$f" ] || fail "$f: empty or missing"
      cmp -s "$dir/whole/$f" "$dir/merged/$f" || fail "$f: merged shards differ from the unsharded run"
    done
    [ -z "$(ls -A "$dir/merged" | grep '\.tmp$')" ] || fail "temporary files left"
    # A shard written over a full report leaves only its own sweep.json.
    "$bin" sweep --spec "$spec" --shard 1/3 --jobs 1 --out "$dir/whole" > "$dir/over.out" || fail "shard over a report failed"
    [ "$(ls -A "$dir/whole")" = "sweep.json" ] || fail "stale full-report files beside a shard: $(ls -A "$dir/whole")"
    grep -q '^removed .*sweep.html: a full report of an earlier run' "$dir/over.out" || fail "the removal is not said"
    ;;
  specs)
    # Every spec in sweeps/ parses and runs (one pair of it: shard 1 of as many as it has cells).
    for f in "$source_dir"/sweeps/*.json; do
      cells=$(python3 -c "import json,sys,math; d=json.load(open(sys.argv[1])); print(math.prod(len(a['values']) for a in d.get('axes', [])))" "$f")
      "$bin" sweep --spec "$f" --seeds 1 --shard "1/$cells" --out "$dir/$(basename "$f" .json)" > "$dir/spec.out" 2>&1 ||
        fail "$f: $(cat "$dir/spec.out")"
    done
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
