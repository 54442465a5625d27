#!/usr/bin/env bash
# tests/unit/cli_json_depth_test.sh LEASEPROOF: every JSON input of the CLI
# refuses nesting deeper than base/json_depth.hpp's limit with a message
# naming the input (exit 2), where 300,000 levels crashed `run --config`
# (exit 139); dynamo replay says so for the line, check-real skips the line
# as it skips any that is not an event; 128 levels are accepted.
set -uo pipefail
binary=${1:?usage: cli_json_depth_test.sh LEASEPROOF}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -c "print('{\"a\":' * 300000 + '1' + '}' * 300000)" >"$work/deep.json"
python3 -c "print('{\"seed\":1,\"x\":' + '[' * 300000 + ']' * 300000 + '}')" >"$work/deep.jsonl"
python3 -c "print('{\"target\":\"DynamoDB_20120810.GetItem\",\"body\":' + '[' * 300000 + ']' * 300000 + '}')" >"$work/requests.jsonl"
python3 -c "print('{\"event\":\"lease.open\",\"mono_ms\":1,\"x\":' + '[' * 300000 + ']' * 300000 + '}')" >"$work/events.jsonl"
# Exactly at the limit is fine: 128 levels of objects.
python3 -c "print('{\"a\":' * 127 + '{}' + '}' * 127)" >"$work/limit.json"
failures=0

expect() {  # NAME STATUS PATTERN -- COMMAND...
  local name=$1 want=$2 pattern=$3
  shift 4
  local output status
  output=$("$@" 2>&1)
  status=$?
  if [[ $status -ne $want ]] || ! grep -qE -- "$pattern" <<<"$output"; then
    echo "FAIL $name: exit $status (expected $want), output not matching '$pattern':" >&2
    tail -n 5 <<<"$output" >&2
    failures=$((failures + 1))
  else
    echo "PASS $name: exit $status: $(grep -E -- "$pattern" <<<"$output" | head -n 1 | cut -c1-160)"
  fi
}

expect "run --config" 2 "--config '.*deep.json': nested more than 128 levels deep" -- \
  "$binary" run --seed 1 --config "$work/deep.json"
# An argument is at most 128 KiB: 1,000 levels.
expect "run --params" 2 "--params: nested more than 128 levels deep" -- \
  "$binary" run --seed 1 --params "$(python3 -c "print('{\"a\":' * 1000 + '1' + '}' * 1000)")"
expect "gate --regressions" 2 "--regressions: '.*deep.jsonl' line 1: nested more than 128 levels deep" -- \
  "$binary" gate --seeds 1 --regressions "$work/deep.jsonl" --no-record
expect "sweep --spec" 2 "--spec: '.*deep.json': nested more than 128 levels deep" -- \
  "$binary" sweep --spec "$work/deep.json" --out "$work/sweep"
expect "dynamo replay" 2 "line 1: nested more than 128 levels deep" -- \
  "$binary" dynamo replay "$work/requests.jsonl"
expect "check-real" 2 "events.jsonl:1: not a JSON object with .* \(skipped\)" -- \
  "$binary" check-real --events "$work/events.jsonl"
expect "at the limit" 2 "--config '.*limit.json': a: unknown|unknown" -- \
  "$binary" run --seed 1 --config "$work/limit.json"
if ((failures > 0)); then
  echo "cli_json_depth: $failures failed" >&2
  exit 1
fi
echo "cli_json_depth: all passed"
