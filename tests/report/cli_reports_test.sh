#!/usr/bin/env bash
# The report commands end to end, as the README shows them: `run --perfetto`
# writes a whole file and leaves the trace hash as it was; an unwritable file
# and an unknown connection get clear errors and a non-zero exit, and leave no
# file behind. Usage: cli_reports_test.sh LEASEPROOF_BINARY perfetto|unwritable|timeline
set -u
bin=$1
case_name=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
args=(--seed 1 --scenario lease-crash --duration 2m --params '{"workers":3,"connections":20,"crash_every":"40s"}')

case $case_name in
  perfetto)
    "$bin" run "${args[@]}" > "$dir/plain.out" || fail "the plain run failed"
    "$bin" run "${args[@]}" --perfetto "$dir/run.json" > "$dir/perfetto.out" || fail "run --perfetto failed"
    [ -s "$dir/run.json" ] || fail "no file written"
    [ ! -e "$dir/run.json.tmp" ] || fail "the temporary file was left"
    grep -q '"traceEvents"' "$dir/run.json" || fail "not a trace-event document"
    grep -q '^perfetto: .*run.json (' "$dir/perfetto.out" || fail "no 'perfetto:' line"
    plain=$(grep '^trace hash:' "$dir/plain.out")
    with=$(grep '^trace hash:' "$dir/perfetto.out")
    [ -n "$plain" ] && [ "$plain" = "$with" ] || fail "trace hash changed: '$plain' vs '$with'"
    ;;
  unwritable)
    "$bin" run "${args[@]}" --perfetto "$dir/missing/run.json" > /dev/null 2> "$dir/err"
    status=$?
    [ $status -eq 2 ] || fail "exit status $status for a file in a missing directory"
    grep -q -- "--perfetto: cannot write '$dir/missing/run.json'" "$dir/err" || fail "unclear error: $(cat "$dir/err")"
    [ ! -e "$dir/missing" ] || fail "something was created"
    # A name taken by a directory: the rename fails once the run is done.
    mkdir -p "$dir/taken/inside"
    "$bin" run "${args[@]}" --perfetto "$dir/taken" > /dev/null 2> "$dir/err"
    status=$?
    [ $status -ne 0 ] || fail "exit status 0 when the file could not be put in place"
    grep -q -- "--perfetto: renaming" "$dir/err" || fail "unclear error: $(cat "$dir/err")"
    [ ! -e "$dir/taken.tmp" ] || fail "the temporary file was left"
    ;;
  timeline)
    "$bin" timeline "${args[@]}" --connection c3 > "$dir/out" 2> "$dir/err" || fail "timeline failed: $(cat "$dir/err")"
    grep -q 'opens: acts as the owner, epoch 1' "$dir/out" || fail "no open line: $(cat "$dir/out")"
    grep -q '^reproduce: leaseproof run --seed 1 --scenario lease-crash' "$dir/out" || fail "no reproduce line"
    "$bin" timeline "${args[@]}" --connection nope > /dev/null 2> "$dir/err"
    status=$?
    [ $status -eq 2 ] || fail "exit status $status for an unknown connection"
    grep -q "no event of this run names connection 'nope'; its 20 connections are c0, c1, c2" "$dir/err" ||
      fail "unclear error: $(cat "$dir/err")"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "ok: $case_name"
