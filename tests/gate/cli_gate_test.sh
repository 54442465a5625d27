#!/usr/bin/env bash
# `leaseproof gate` end to end: verdicts, exit codes, JUnit XML, the
# regression file, the budget, and bad input. Usage: cli_gate_test.sh BINARY CASE
set -euo pipefail
bin=$1
case_name=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

small='{"workers":3,"connections":50,"crash_every":"4m"}'
# The articles' algorithm with a worker clock 16 s fast (lease 20 s, heartbeat 5 s) loses single ownership.
unsafe='{"workers":3,"connections":50,"crash_every":"4m","algorithm":"seed","fast_worker_offset":"16s"}'
# The core with a deliberately broken hub (evicted messages skipped without a
# reset): a configuration meant to pass, so its failures are regressions.
broken='{"workers":2,"connections":4,"stream":{"ring_messages":10,"replay_messages":10,"broken_hub":true}}'

case $case_name in
  pass)
    "$bin" gate --seeds 3 --scenario lease-crash --duration 10m --params "$small" --junit "$dir/j.xml" >"$dir/out" \
      || fail "a passing gate exited $?"
    grep -q '^gate: PASS$' "$dir/out" || fail "no PASS line"
    grep -q 'new seeds 3 of 3 ran: 3 passed, 0 failed' "$dir/out" || fail "counts: $(cat "$dir/out")"
    grep -q '<testsuites name="leaseproof gate" tests="3" failures="0"' "$dir/j.xml" || fail "JUnit totals"
    [[ $(grep -c '<testcase ' "$dir/j.xml") == 3 ]] || fail "JUnit testcases"
    ;;
  fail)
    status=0
    "$bin" gate --seeds 4 --scenario lease-crash --duration 10m --params "$unsafe" --junit "$dir/j.xml" \
      --regressions "$dir/reg.jsonl" --create-regressions >"$dir/out" || status=$?
    [[ $status == 1 ]] || fail "a failing gate exited $status"
    grep -q 'FAIL (single ownership)' "$dir/out" || fail "no single-ownership failure: $(cat "$dir/out")"
    grep -q 'reproduce: leaseproof run --seed ' "$dir/out" || fail "no reproduce line"
    grep -q '<failure type="single ownership"' "$dir/j.xml" || fail "JUnit failure"
    # The articles' algorithm is expected to fail: its failures pollute no regression file.
    grep -q 'expected to fail and are not recorded as regressions (.*algorithm seed' "$dir/out" \
      || fail "expected failures not reported as such: $(cat "$dir/out")"
    [[ ! -e "$dir/reg.jsonl" ]] || fail "expected failures were recorded: $(cat "$dir/reg.jsonl")"
    status=0
    "$bin" gate --seeds 3 --scenario lease-crash --duration 10m --params "$broken" \
      --regressions "$dir/reg.jsonl" --create-regressions >"$dir/out" || status=$?
    [[ $status == 1 ]] || fail "a broken core passed the gate (exit $status)"
    added=$(grep -c '"seed"' "$dir/reg.jsonl")
    ((added >= 1)) || fail "no regression recorded"
    # The next gate re-runs them first (they still fail) and adds no duplicates.
    status=0
    "$bin" gate --seeds 1 --scenario lease-crash --duration 10m --params "$small" --regressions "$dir/reg.jsonl" \
      >"$dir/out2" || status=$?
    [[ $status == 1 ]] || fail "regressions did not fail the second gate (exit $status)"
    grep -q "regressions 0 passed, $added failed" "$dir/out2" || fail "regressions not re-run: $(cat "$dir/out2")"
    [[ $(grep -c '"seed"' "$dir/reg.jsonl") == "$added" ]] || fail "duplicates added"
    ;;
  budget)
    "$bin" gate --seeds 100000 --budget 2s --scenario lease-crash --duration 10m --params "$small" >"$dir/out" \
      || fail "exit $?"
    grep -q '(budget reached)' "$dir/out" || fail "budget not reported: $(tail -3 "$dir/out")"
    grep -q 'seeds/s' "$dir/out" || fail "no throughput line"
    # A budget spent at once still runs the minimum number of new seeds.
    "$bin" gate --seeds 1000 --budget 1ms --min-seeds 5 --scenario lease-crash --duration 10m --params "$small" \
      >"$dir/out" || fail "exit $?"
    grep -q 'new seeds 5 of 1000 ran (budget reached): 5 passed' "$dir/out" || fail "min seeds: $(tail -3 "$dir/out")"
    ;;
  inconclusive)
    # A 1-hour lease in a 10-minute run: the recovery bound outlasts the run.
    short='{"workers":4,"connections":40,"lease":"1h","crash_every":"2m"}'
    status=0
    "$bin" run --seed 1 --scenario lease-crash --duration 10m --params "$short" >"$dir/out" || status=$?
    [[ $status == 3 ]] || fail "an inconclusive run exited $status, expected 3"
    grep -q '^verdict: INCONCLUSIVE$' "$dir/out" || fail "no INCONCLUSIVE verdict: $(tail -3 "$dir/out")"
    grep -q '^inconclusive: .*connections ownerless at the end were never judged' "$dir/out" || fail "no reason given"
    status=0
    "$bin" gate --seeds 2 --scenario lease-crash --duration 10m --params "$short" >"$dir/out" || status=$?
    [[ $status == 3 ]] || fail "an inconclusive gate exited $status, expected 3"
    grep -q '^gate: INCONCLUSIVE (2 of the passing runs' "$dir/out" || fail "gate verdict: $(tail -3 "$dir/out")"
    ;;
  bad)
    expect_usage() {
      local expected=$1; shift
      local status=0
      "$bin" gate "$@" >"$dir/out" 2>"$dir/err" || status=$?
      [[ $status == 2 ]] || fail "gate $* exited $status, expected 2"
      grep -q -- "$expected" "$dir/err" || fail "gate $*: message '$(cat "$dir/err")' lacks '$expected'"
      [[ ! -s "$dir/out" ]] || fail "gate $* ran something: $(cat "$dir/out")"
    }
    printf '# ok\n{"scenario":"lease-swarm","seed":"7"}\n' >"$dir/bad.jsonl"
    expect_usage "line 2: \"seed\" must be an unsigned integer" --regressions "$dir/bad.jsonl"
    printf '{"scenario":"lease-swarm","seed":7,"color":"red"}\n' >"$dir/bad.jsonl"
    expect_usage 'unknown field "color"' --regressions "$dir/bad.jsonl"
    printf 'not json\n' >"$dir/bad.jsonl"
    expect_usage "line 1: not valid JSON: parse error at line 1, column 2" --regressions "$dir/bad.jsonl"
    printf '[1]\n' >"$dir/bad.jsonl"
    expect_usage "line 1: not a JSON object" --regressions "$dir/bad.jsonl"
    expect_usage "--junit: cannot write" --junit "$dir/missing/j.xml"
    expect_usage "--junit: '$dir' is a directory; give a file name" --junit "$dir"
    # Seed counts are bounded (every result is kept): refused before anything runs.
    expect_usage "--seeds: Value 2000000 not in range 1 to 1000000" --seeds 2000000
    for command in check check-determinism; do
      status=0
      "$bin" $command --seeds 1..10000000000 >"$dir/out" 2>"$dir/err" || status=$?
      [[ $status == 2 ]] || fail "$command with 10^10 seeds exited $status, expected 2"
      grep -q "holds 10000000000 seeds; at most 1000000 a command" "$dir/err" || fail "$command: $(cat "$dir/err")"
    done
    # JSON input: a key given twice is refused, a syntax error names its place.
    expect_usage 'the key "workers" appears twice in one object' --params '{"workers":3,"workers":4}'
    expect_usage "--params: not valid JSON: parse error at line 1, column 12" --params '{"workers":'
    printf '{"scenario":"lease-swarm","seed":7,"seed":8}\n' >"$dir/dup.jsonl"
    expect_usage "line 1: the key \"seed\" appears twice" --regressions "$dir/dup.jsonl"
    # A mistyped regression file would silently skip every regression.
    expect_usage "'$dir/none.jsonl' does not exist (check the path, or add --create-regressions" \
      --regressions "$dir/none.jsonl"
    expect_usage "--create-regressions: needs --regressions FILE" --create-regressions
    expect_usage "--budget: '0s' must be longer than zero" --budget 0s
    expect_usage "--first-seed: 'x'" --first-seed x
    expect_usage "heartbeat" --scenario lease-crash --params '{"heartbeat":"30s","lease":"20s"}'
    # Valid for seed 3 (no relay drawn), refused for seed 4 (a relay: 4 hops
    # of 900 ms outlast the pong timeout): every seed is checked before any
    # runs (this aborted on an assertion half-way through the gate).
    expect_usage "seed 4: stream.pong_timeout (3s)" --seeds 40 --first-seed 3 \
      --params '{"latency":"900ms","stream":{"pong_timeout":"3s"}}'
    # Shards: a bad index, an index from an unset environment, a shard that would record.
    expect_usage "--shard: '3/2': the index i must be between 1 and n (2)" --shard 3/2 --no-record
    JOB_COMPLETION_INDEX= expect_usage "--shard: 'index/2' takes the index from JOB_COMPLETION_INDEX" \
      --shard index/2 --no-record
    expect_usage "a shard does not record regressions" --shard 1/2
    # Merging gate shards: every shard of one gate, each once.
    expect_merge() {
      local expected=$1; shift
      local status=0
      "$bin" report merge --out "$dir/merged" "$@" >"$dir/out" 2>"$dir/err" || status=$?
      [[ $status == 2 ]] || fail "report merge $* exited $status, expected 2"
      grep -q -- "$expected" "$dir/err" || fail "report merge $*: message '$(cat "$dir/err")' lacks '$expected'"
      [[ ! -e "$dir/merged" ]] || fail "report merge $* wrote $dir/merged"
    }
    for shard in 1 2; do
      "$bin" gate --seeds 2 --shard $shard/3 --no-record --out "$dir/s$shard" >/dev/null ||
        fail "gate shard $shard/3 failed"
    done
    expect_merge "shard 3/3 is missing" "$dir/s1" "$dir/s2"
    expect_merge "shard 1/3 is also" "$dir/s1" "$dir/s1" "$dir/s2"
    "$bin" gate --seeds 3 --shard 3/3 --no-record --out "$dir/other" >/dev/null || fail "gate 3/3 failed"
    expect_merge "its seeds differs from" "$dir/s1" "$dir/s2" "$dir/other"
    "$bin" gate --seeds 2 --shard 3/3 --no-record --out "$dir/s3" >/dev/null || fail "gate 3/3 failed"
    mkdir "$dir/edited" && sed 's/"verdict": "pass"/"verdict": 5/' "$dir/s1/gate.json" >"$dir/edited/gate.json"
    grep -q '"verdict": 5' "$dir/edited/gate.json" || fail "the edited gate.json has no verdict to break"
    expect_merge "a gate.json is not shaped as gate --out writes it" "$dir/edited" "$dir/s2" "$dir/s3"
    status=0
    "$bin" report merge --out "$dir/merged" "$dir/s1" "$dir/s2" "$dir/s3" >"$dir/out" 2>&1 || status=$?
    [[ $status == 0 ]] || fail "merging three good shards exited $status: $(cat "$dir/out")"
    grep -q "report merge: 3 gate shards, 2 runs: 0 failed" "$dir/out" || fail "merge summary: $(cat "$dir/out")"
    ;;
  combined)
    # The combined run: new seeds take the lease swarm and the registry's in
    # turn, each with its own default duration; shards merge into the same runs.
    "$bin" gate --scenario lease-swarm,registry-swarm --seeds 4 --no-record --junit "$dir/j.xml" --out "$dir/whole" \
      >"$dir/out" || fail "the combined gate exited $?: $(cat "$dir/out")"
    grep -q 'scenarios lease-swarm,registry-swarm seeds 1..4 in turn (duration 10m0s,30m0s)' "$dir/out" ||
      fail "start line: $(head -1 "$dir/out")"
    grep -q '^gate: PASS$' "$dir/out" || fail "no PASS line"
    runs=$(python3 -c 'import json,sys; print(" ".join("/".join(str(r[k]) for k in ("scenario", "seed", "duration")) for r in json.load(open(sys.argv[1]))["runs"]))' "$dir/whole/gate.json")
    [[ $runs == "lease-swarm/1/10m0s registry-swarm/2/30m0s lease-swarm/3/10m0s registry-swarm/4/30m0s" ]] ||
      fail "runs: $runs"
    grep -q 'classname="leaseproof.gate.seeds.registry-swarm" name="seed 2"' "$dir/j.xml" || fail "JUnit names no registry run"
    for shard in 1 2; do
      "$bin" gate --scenario lease-swarm,registry-swarm --seeds 4 --shard $shard/2 --no-record --out "$dir/s$shard" \
        >/dev/null || fail "combined shard $shard/2 failed"
    done
    "$bin" report merge --out "$dir/merged" "$dir/s1" "$dir/s2" >"$dir/out" 2>&1 || fail "merge: $(cat "$dir/out")"
    cmp -s "$dir/merged/gate.json" "$dir/whole/gate.json" || fail "the merged shards differ from the whole gate"
    # A registry regression (the seed's dropped UnprocessedItems) fails the gate with its reproduce line.
    printf '{"scenario":"registry","seed":1,"parameters":{"flaws":["drop_unprocessed"]},"kind":"staleness"}\n' \
      >"$dir/reg.jsonl"
    status=0
    "$bin" gate --scenario lease-swarm,registry-swarm --seeds 2 --regressions "$dir/reg.jsonl" --no-record \
      >"$dir/out" || status=$?
    [[ $status == 1 ]] || fail "a failing registry regression exited $status"
    grep -q "regression seed 1: FAIL (staleness)" "$dir/out" || fail "no registry failure: $(cat "$dir/out")"
    grep -q "reproduce: leaseproof run --seed 1 --scenario registry --duration 30m0s --params" "$dir/out" ||
      fail "no reproduce line: $(cat "$dir/out")"
    # Parameters belong to one scenario; a scenario listed twice is a typo.
    status=0
    "$bin" gate --scenario lease-swarm,registry-swarm --params '{"loss":"1/10"}' >"$dir/out" 2>"$dir/err" || status=$?
    [[ $status == 2 && ! -s "$dir/out" ]] || fail "--params with a combined gate exited $status"
    grep -q "a combined gate (--scenario lease-swarm,registry-swarm) runs each scenario with its own" "$dir/err" ||
      fail "message: $(cat "$dir/err")"
    # --expiry goes to the scenarios that take it; NAME*K takes K seeds of a turn.
    "$bin" gate --scenario 'lease-swarm*2,registry-swarm' --expiry counter --seeds 3 --no-record --out "$dir/weighted" \
      >"$dir/out" || fail "the weighted gate exited $?: $(cat "$dir/out")"
    runs=$(python3 -c 'import json,sys; print(" ".join(r["scenario"] + "/" + str(r["seed"]) + "/" + json.dumps(r["parameters"], separators=(",", ":")) for r in json.load(open(sys.argv[1]))["runs"]))' "$dir/weighted/gate.json")
    [[ $runs == 'lease-swarm/1/{"expiry":"counter"} lease-swarm/2/{"expiry":"counter"} registry-swarm/3/{}' ]] ||
      fail "weighted runs: $runs"
    status=0
    "$bin" gate --scenario 'lease-swarm*0' >"$dir/out" 2>"$dir/err" || status=$?
    [[ $status == 2 ]] && grep -q "the weight after '\*' must be a whole number from 1 to 100" "$dir/err" ||
      fail "weight 0: $(cat "$dir/err")"
    # Without --scenario, --params or --config: the default mix.
    "$bin" gate --seeds 10 --no-record --out "$dir/default" >"$dir/out" || fail "the default gate exited $?: $(cat "$dir/out")"
    grep -q 'scenarios lease-swarm\*8,stream-wave,registry-swarm seeds 1..10 in turn' "$dir/out" ||
      fail "default start line: $(head -1 "$dir/out")"
    runs=$(python3 -c 'import json,sys; print(" ".join(r["scenario"] for r in json.load(open(sys.argv[1]))["runs"]))' "$dir/default/gate.json")
    [[ $runs == "$(printf 'lease-swarm %.0s' 1 2 3 4 5 6 7 8)stream-wave registry-swarm" ]] || fail "default runs: $runs"
    "$bin" gate --seeds 1 --params '{"loss":"1/10"}' --no-record >"$dir/out" || fail "a gate with --params exited $?"
    grep -q 'then scenario lease-swarm seeds 1..1 ' "$dir/out" || fail "--params start line: $(head -1 "$dir/out")"
    status=0
    "$bin" gate --scenario registry-swarm,lease-swarm,registry-swarm >"$dir/out" 2>"$dir/err" || status=$?
    [[ $status == 2 ]] && grep -q "'registry-swarm' is listed twice" "$dir/err" || fail "twice: $(cat "$dir/err")"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "ok: $case_name"
