#!/usr/bin/env bash
# tests/unit/cli_verdicts_test.sh LEASEPROOF: a verdict says what the run
# proved. A run in which no connection was ever owned (1 ns; every message
# lost until the end) is INCONCLUSIVE, exit 3, not PASS; loss above the
# recovery bounds' 1/4 is printed as beyond the assumptions; the verdict's
# violation count is the count the run prints (ten listed, "... and N more").
set -uo pipefail
binary=${1:?usage: cli_verdicts_test.sh LEASEPROOF}
failures=0
fail() {
  echo "FAIL $*" >&2
  failures=$((failures + 1))
}
expect_inconclusive() {  # ARGS...
  local output status
  output=$("$binary" run "$@" 2>&1)
  status=$?
  if [[ $status -ne 3 ]] || ! grep -q '^verdict: INCONCLUSIVE$' <<<"$output" ||
    ! grep -q '^inconclusive: no connection was ever owned' <<<"$output"; then
    fail "leaseproof run $*: exit $status, expected 3 and 'no connection was ever owned': $(tail -n 4 <<<"$output")"
  else
    echo "PASS leaseproof run $*: $(grep '^inconclusive:' <<<"$output")"
  fi
}
expect_inconclusive --seed 1 --duration 1ns
expect_inconclusive --seed 1 --duration 2m --params '{"loss":"1/1","heal_at":"2m"}'

output=$("$binary" run --seed 1 --duration 1m --params '{"loss":"1/3"}' 2>&1)
if grep -q 'BEYOND THE ASSUMPTIONS: message loss 1/3 > 1/4 the recovery bounds assume' <<<"$output"; then
  echo "PASS loss 1/3 is beyond the assumptions"
else
  fail "loss 1/3 not flagged beyond the assumptions: $(grep -m1 '^options:' <<<"$output")"
fi
output=$("$binary" run --seed 1 --duration 1m --params '{"loss":"1/4"}' 2>&1)
if grep -q 'BEYOND THE ASSUMPTIONS' <<<"$output"; then fail "loss 1/4 flagged beyond the assumptions"; fi

# The articles' algorithm with a worker clock 16 s fast (lease 20 s): more
# violations than the checkers keep (a fixed fleet, no swarm draws).
output=$("$binary" run --seed 1 --scenario lease-steady --duration 5m \
  --params '{"algorithm":"seed","fast_worker_offset":"16s"}' 2>&1)
verdict=$(sed -n 's/^verdict: FAIL (\([0-9]*\) violations)$/\1/p' <<<"$output")
listed=$(grep -c '^violation: ' <<<"$output")
more=$(sed -n 's/^\.\.\. and \([0-9]*\) more violations.*/\1/p' <<<"$output")
if [[ -z $verdict || -z $more || $listed -ne 10 || $((listed + more)) -ne $verdict || $verdict -le 50 ]]; then
  fail "verdict count '$verdict' != $listed listed + '$more' more (or not above the 50 a checker keeps): $(grep '^verdict' <<<"$output")"
else
  echo "PASS verdict counts $verdict violations = $listed listed + $more more"
fi
if ((failures > 0)); then
  echo "cli_verdicts: $failures failed" >&2
  exit 1
fi
echo "cli_verdicts: all passed"
