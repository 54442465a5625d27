#!/usr/bin/env bash
# The report commands end to end, as the README shows them: `run --perfetto`
# writes a whole file and leaves the trace hash as it was; an unwritable file
# and an unknown connection get clear errors and a non-zero exit, and leave no
# file behind; an interrupted run leaves no partial file.
# --trace writes through a temporary of the process's own: two runs given one
# path both finish with a whole file there; a rename that fails is exit 1
# with a message, not an abort; --trace and --perfetto naming one file are
# refused before the run.
# Usage: cli_reports_test.sh LEASEPROOF_BINARY perfetto|unwritable|interrupt|next|timeline|trace
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
    ! ls "$dir"/run.json.tmp* > /dev/null 2>&1 || fail "a temporary file was left: $(ls "$dir")"
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
    # A name taken by a directory: refused before the run (it used to run
    # the whole job and then fail to rename its file into place).
    mkdir -p "$dir/taken/inside"
    "$bin" run "${args[@]}" --perfetto "$dir/taken" > "$dir/out" 2> "$dir/err"
    status=$?
    [ $status -eq 2 ] || fail "exit status $status for a file name taken by a directory"
    grep -q -- "--perfetto: '$dir/taken' is a directory; give a file name" "$dir/err" || fail "unclear error: $(cat "$dir/err")"
    [ ! -s "$dir/out" ] || fail "the run started: $(head -2 "$dir/out")"
    ! ls "$dir"/taken.tmp* > /dev/null 2>&1 || fail "a temporary file was left"
    "$bin" run "${args[@]}" --trace "$dir/taken" > "$dir/out" 2> "$dir/err"
    [ $? -eq 2 ] && grep -q -- "--trace: '$dir/taken' is a directory" "$dir/err" || fail "--trace DIR: $(cat "$dir/err")"
    ;;
  trace)
    long=(--seed 1 --duration 30m)
    # Two runs, one trace path, at once: each renames its own whole file into place.
    "$bin" run "${long[@]}" --trace "$dir/t.jsonl" > "$dir/a.out" 2>&1 &
    first=$!
    "$bin" run "${long[@]}" --trace "$dir/t.jsonl" > "$dir/b.out" 2>&1
    second=$?
    wait $first
    [ $? -eq 0 ] && [ $second -eq 0 ] || fail "two runs with one --trace: exit $second and the other's: $(tail -2 "$dir/a.out")"
    events=$(sed -n 's/^trace: .* (\([0-9]*\) events.*/\1/p' "$dir/a.out")
    [ -n "$events" ] && [ "$(wc -l < "$dir/t.jsonl")" -eq "$events" ] || fail "the trace has $(wc -l < "$dir/t.jsonl") lines, a run wrote $events"
    python3 -c "import json,sys; [json.loads(l) for l in open(sys.argv[1])]" "$dir/t.jsonl" || fail "the trace is not whole JSON lines"
    ! ls "$dir"/t.jsonl.tmp* > /dev/null 2>&1 || fail "a temporary was left: $(ls "$dir")"
    # The name taken by a directory while the run runs: the rename fails, said, exit 1, nothing left.
    rm "$dir/t.jsonl"
    "$bin" run "${long[@]}" --trace "$dir/t.jsonl" > "$dir/c.out" 2> "$dir/c.err" &
    pid=$!
    for _ in $(seq 100); do [ -n "$(find "$dir" -name 't.jsonl.tmp-*')" ] && break; sleep 0.05; done
    mkdir -p "$dir/t.jsonl/inside"
    wait $pid
    status=$?
    [ $status -eq 1 ] || fail "exit status $status when the rename fails, expected 1: $(cat "$dir/c.err")"
    grep -q -- "--trace: cannot move '$dir/t.jsonl.tmp-[0-9]*-[0-9]*' into place as '$dir/t.jsonl'" "$dir/c.err" || fail "unclear error: $(cat "$dir/c.err")"
    ! ls "$dir"/t.jsonl.tmp* > /dev/null 2>&1 || fail "a temporary was left: $(ls "$dir")"
    # One file for two outputs: refused before the run.
    "$bin" run "${args[@]}" --trace "$dir/same" --perfetto "$dir/./same" > "$dir/d.out" 2> "$dir/d.err"
    status=$?
    [ $status -eq 2 ] || fail "exit status $status for --trace and --perfetto naming one file"
    grep -q -- "--trace and --perfetto both name '$dir/./same': give each its own file" "$dir/d.err" || fail "unclear error: $(cat "$dir/d.err")"
    [ ! -s "$dir/d.out" ] || fail "the run started"
    ;;
  interrupt)
    # A run stopped by a signal leaves no partial trace or Perfetto file
    # (SIGTERM here: a background job of a script ignores SIGINT; Ctrl-C in
    # a terminal takes the same path).
    "$bin" run --seed 1 --scenario lease-crash --trace "$dir/t.jsonl" --perfetto "$dir/p.json" > /dev/null 2>&1 &
    pid=$!
    for _ in $(seq 100); do [ -n "$(find "$dir" -name 't.jsonl.tmp-*' -size +0)" ] && break; sleep 0.1; done
    [ -n "$(find "$dir" -name 't.jsonl.tmp-*' -size +0)" ] || { kill -9 $pid; fail "the run wrote no trace within 10 s"; }
    kill -TERM $pid
    wait $pid
    status=$?
    [ $status -eq 143 ] || fail "exit status $status after SIGTERM, expected 143"
    leftover=$(ls "$dir")
    [ -z "$leftover" ] || fail "files left after the interrupt: $leftover"
    ;;
  next)
    # A FAIL ends with the commands that lead to its story, with this
    # binary's path; the replay and timeline lines run as printed.
    unsafe=(--seed 3 --scenario lease-crash --duration 10m
            --params '{"workers":3,"connections":50,"crash_every":"4m","algorithm":"seed","fast_worker_offset":"16s"}')
    "$bin" run "${unsafe[@]}" > "$dir/out"
    [ $? -eq 1 ] || fail "the unsafe run did not fail"
    grep -q "^next:$" "$dir/out" || fail "no next: block"
    grep -q "^  $bin shrink --seed 3 " "$dir/out" || fail "no shrink line with the binary's path: $(tail -4 "$dir/out")"
    for command in replay timeline; do
      line=$(grep "^  $bin $command " "$dir/out" | sed 's/   # .*//')
      [ -n "$line" ] || fail "no $command line"
      eval "$line" > "$dir/$command.out" 2>&1 || fail "'$line' failed: $(tail -3 "$dir/$command.out")"
    done
    grep -q "connections with more than one acting owner: [1-9]" "$dir/replay.out" ||
      fail "the replay does not show the overlap: $(tail -3 "$dir/replay.out")"
    grep -q "c[0-9]" "$dir/timeline.out" || fail "the timeline is empty"
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
