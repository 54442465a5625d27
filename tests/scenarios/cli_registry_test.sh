#!/usr/bin/env bash
# `leaseproof registry scale` end to end: a small run prints its three tables
# and writes JSON; bad input exits 2 naming the option and writes nothing.
# Usage: cli_registry_test.sh BINARY
set -euo pipefail
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" registry scale --memberships 5000 --room-sizes 12,500 --table-sizes 1000,5000 --hot-room 2000 \
  --json "$dir/scale.json" >"$dir/out" 2>"$dir/err" || fail "a small run exited $?: $(cat "$dir/err")"
grep -q '^| 12 | 8 | 8 | 12 |' "$dir/out" || fail "no row for the room of 12 on 8 shards: $(cat "$dir/out")"
grep -q '^| Scan of the table | | .* | 5000 |' "$dir/out" || fail "no Scan row: $(cat "$dir/out")"
grep -q '^| 5000 | 12 |' "$dir/out" || fail "no chart row for 5000 items"
grep -q 'registry scale: done in' "$dir/err" || fail "no closing progress line"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['table_items']==5000 and len(d['hot_room'])==2" \
  "$dir/scale.json" || fail "JSON"
! ls "$dir"/scale.json.tmp* > /dev/null 2>&1 || fail "temporary file left"

status=0
"$bin" registry scale --shards 0 --json "$dir/bad.json" >"$dir/out" 2>"$dir/err" || status=$?
[[ $status == 2 ]] || fail "--shards 0 exited $status"
grep -q 'shard count 0 must be between 1 and 1000' "$dir/err" || fail "message: $(cat "$dir/err")"
[[ ! -e "$dir/bad.json" ]] || fail "bad input wrote a file"
status=0
"$bin" registry scale --room-sizes 12,x >"$dir/out" 2>"$dir/err" || status=$?
[[ $status == 2 ]] || fail "--room-sizes 12,x exited $status"
grep -q -- '--room-sizes' "$dir/err" || fail "message does not name --room-sizes: $(cat "$dir/err")"
# shrink: a failing registry run made small, with its reproduce line.
"$bin" shrink --seed 1 --scenario registry --params '{"flaws":["drop_unprocessed"]}' --budget 100 >"$dir/out" 2>&1 \
  || fail "shrink exited $?: $(tail -5 "$dir/out")"
grep -q '^shrunk: staleness still fails after' "$dir/out" || fail "no shrunk line: $(tail -5 "$dir/out")"
grep -q '^reproduce: leaseproof run --seed 1 --scenario registry .*"clients":1,' "$dir/out" \
  || fail "not shrunk to one client: $(grep reproduce "$dir/out")"
status=0
"$bin" shrink --seed 1 --scenario registry --property ownership >"$dir/out" 2>&1 || status=$?
[[ $status == 2 ]] || fail "shrink --property ownership exited $status"
grep -q "unknown registry property 'ownership'" "$dir/out" || fail "message: $(cat "$dir/out")"

# The core passes the swarm's first seeds.
"$bin" check --seeds 1..40 --scenario registry-swarm >"$dir/out" 2>&1 || fail "registry-swarm 1..40: $(tail -3 "$dir/out")"
grep -q 'check: 40 seeds, 40 passed, 0 failed' "$dir/out" || fail "check line: $(tail -1 "$dir/out")"
echo "cli_registry: ok"
