#!/usr/bin/env bash
# `leaseproof shrink` and `leaseproof replay` end to end: the acceptance (a
# failing seed of the articles' algorithm shrunk to at most 2 faults and 2
# workers, its printed reproduce line failing the same way), exit codes, the
# replay's lines against `run --trace`, and bad input.
# Usage: cli_shrink_test.sh BINARY CASE
set -euo pipefail
bin=$1
case_name=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

expect_usage() {  # expected message, command and flags
  local expected=$1; shift
  local status=0
  "$bin" "$@" >"$dir/out" 2>"$dir/err" || status=$?
  [[ $status == 2 ]] || fail "$* exited $status, expected 2"
  grep -q -- "$expected" "$dir/err" || fail "$*: message '$(cat "$dir/err")' lacks '$expected'"
}

case $case_name in
  shrink)
    # The swarm with the articles' algorithm fails single ownership at seed 3.
    "$bin" shrink --seed 3 --algorithm seed --jobs 2 >"$dir/out" || fail "shrink exited $?: $(cat "$dir/out")"
    grep -q '^start (run 1): fails single ownership' "$dir/out" || fail "no start line: $(cat "$dir/out")"
    grep -q '^step 1 (run ' "$dir/out" || fail "no progress lines"
    faults=$(sed -n 's/^faults: \([0-9]*\)$/\1/p' "$dir/out")
    [[ -n $faults ]] && ((faults <= 2)) || fail "faults: '$faults'"
    grep -Eq '^  to:   [0-9]+ faults?, [12] workers?, ' "$dir/out" || fail "workers: $(grep '  to:' "$dir/out")"
    grep -q '^violation: single ownership: ' "$dir/out" || fail "no violation line"
    line=$(sed -n 's/^reproduce: leaseproof //p' "$dir/out")
    [[ -n $line ]] || fail "no reproduce line"
    # The printed line, run as printed, fails single ownership with the same trace hash.
    status=0
    eval "\"\$bin\" $line" >"$dir/run" || status=$?
    [[ $status == 1 ]] || fail "the reproduce line exited $status: $line"
    grep -q '^violation: single ownership: ' "$dir/run" || fail "the reproduce line does not fail single ownership"
    hash=$(sed -n 's/^trace hash: //p' "$dir/out")
    grep -q "^trace hash: $hash\$" "$dir/run" || fail "trace hashes differ: $hash vs $(grep 'trace hash' "$dir/run")"
    ;;
  passing)
    status=0
    "$bin" shrink --seed 7 >"$dir/out" || status=$?
    [[ $status == 1 ]] || fail "shrinking a passing run exited $status"
    grep -q '^nothing to shrink: the run passes' "$dir/out" || fail "message: $(cat "$dir/out")"
    status=0
    "$bin" shrink --seed 3 --algorithm seed --property liveness >"$dir/out" || status=$?
    [[ $status == 1 ]] || fail "shrinking a property that holds exited $status"
    grep -q 'it does not fail liveness' "$dir/out" || fail "message: $(cat "$dir/out")"
    ;;
  bad)
    expect_usage "--property: unknown property 'ownership'; known: 'single ownership'" \
      shrink --seed 3 --algorithm seed --property ownership
    expect_usage "--budget: must be at least 1 run" shrink --seed 3 --budget 0
    expect_usage "--budget: '-1' is not a number of runs" shrink --seed 3 --budget -1
    expect_usage "shrink works on the lease scenarios" shrink --seed 1 --scenario kernel
    expect_usage "--seed: 'x' is not a seed" shrink --seed x
    expect_usage "workers" shrink --seed 1 --params '{"workers":0}'
    ;;
  replay)
    args=(--seed 4 --scenario lease-crash --duration 3m --params '{"workers":3,"connections":20,"crash_every":"1m"}')
    "$bin" run "${args[@]}" --trace "$dir/trace.jsonl" >/dev/null
    total=$(wc -l <"$dir/trace.jsonl")
    index=$((total / 2))
    "$bin" replay "${args[@]}" --until-event $index --context 7 >"$dir/out" || fail "replay exited $?"
    # The stop event is line i of `run --trace` (index i is line i+1), after the 7 before it.
    expected=$(sed -n "$((index + 1))p" "$dir/trace.jsonl")
    [[ $(grep -A1 '^stop: event ' "$dir/out" | tail -1) == "$expected" ]] || fail "stop line differs from the trace"
    diff <(grep '^{' "$dir/out" | head -7) <(sed -n "$((index - 6)),$((index))p" "$dir/trace.jsonl") \
      || fail "context lines differ from the trace"
    [[ $(grep -c '^{' "$dir/out") == 8 ]] || fail "expected 7 context lines and the event"
    grep -q '^  worker-0#[0-9]* ' "$dir/out" || fail "no owners: $(cat "$dir/out")"
    grep -q '^  connections with more than one acting owner: 0$' "$dir/out" || fail "no overlap line"
    # By time: the last event at or before 1m30s; the trace's next event is later.
    "$bin" replay "${args[@]}" --until-time 1m30s --context 1 >"$dir/out" || fail "replay by time exited $?"
    stop=$(sed -n 's/^stop: event \([0-9]*\) at .*/\1/p' "$dir/out")
    at=$(grep '^{' "$dir/out" | tail -1 | sed 's/.*"t_ns":\([0-9]*\).*/\1/')
    next=$(sed -n "$((stop + 2))p" "$dir/trace.jsonl" | sed 's/.*"t_ns":\([0-9]*\).*/\1/')
    ((at <= 90000000000 && next > 90000000000)) || fail "times: stop at $at, next at $next"
    # One connection's owner, asked for: why DynamoDB accepted its lease.
    "$bin" replay "${args[@]}" --until-time 1m30s --context 0 --explain c3 >"$dir/out" || fail "replay --explain exited $?"
    grep -q '^why DynamoDB accepted' "$dir/out" || fail "no why section: $(cat "$dir/out")"
    grep -q '^  c3 acquire by worker-[0-9]#[0-9]* (message [0-9]*)' "$dir/out" || fail "no acquire of c3: $(cat "$dir/out")"
    grep -q '^      condition: ' "$dir/out" || fail "no condition line"
    ;;
  replay_bad)
    args=(--seed 1 --scenario lease-crash --duration 1m --params '{"workers":2,"connections":5}')
    expect_usage "--until-event: the run has no such event; it ends at 1m0s with" replay "${args[@]}" --until-event 999999999
    expect_usage "give exactly one of --until-event" replay "${args[@]}"
    expect_usage "give exactly one of --until-event" replay "${args[@]}" --until-event 5 --until-time 5s
    expect_usage "--until-event: 'x5' is not an event index" replay "${args[@]}" --until-event x5
    expect_usage "--until-time: 2m0s is after the end of the run (1m0s)" replay "${args[@]}" --until-time 2m
    expect_usage "--until-time: 'soon' is not a time" replay "${args[@]}" --until-time soon
    expect_usage "--explain: the run has no connection 'c77' by event 40" replay "${args[@]}" --until-event 40 --explain c77
    expect_usage "--explain: scenario kernel has no leases" replay --seed 1 --scenario kernel --until-event 5 --explain c1
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "ok: $case_name"
