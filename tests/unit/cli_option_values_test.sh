#!/usr/bin/env bash
# tests/unit/cli_option_values_test.sh LEASEPROOF: an option given an empty
# value, a negative number for an unsigned option, and a directory where
# `dynamo replay` wants a file are refused with exit 2 naming the option,
# before any work; they were taken as the default, wrapped around
# (18446744073709551611 memberships), and exit 0. A streaming run too large
# for memory is refused the same way, and so are the hub's --threads outside
# 1..64 or above 1 with --redis.
set -uo pipefail
binary=${1:?usage: cli_option_values_test.sh LEASEPROOF}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() {  # PATTERN -- ARGS...
  local pattern=$1
  shift 2
  local output status
  output=$("$binary" "$@" 2>&1)
  status=$?
  if [[ $status -ne 2 ]] || ! grep -qE -- "$pattern" <<<"$output" || grep -q '^leaseproof run:' <<<"$output"; then
    echo "FAIL leaseproof $*: exit $status, expected 2 and '$pattern': $(head -n 2 <<<"$output")" >&2
    failures=$((failures + 1))
  else
    echo "PASS leaseproof $*: $(head -n 1 <<<"$output")"
  fi
}
check "--duration: must not be empty" -- run --seed 1 --duration ''
check "--params: must not be empty" -- run --seed 1 --params ''
check "--trace: must not be empty" -- run --seed 1 --trace ''
check "--connection: must not be empty" -- timeline --seed 1 --connection ''
check "--memberships: '-5' is negative" -- registry scale --memberships -5
check "FILE: '$work' is a directory" -- dynamo replay "$work"
# A streaming run keeps about 800 B a published message: a year of
# stream-steady (15.8 billion messages) is refused, not run out of memory.
check "at most 10000000 messages \\(about 8 GB\\) fit" -- run --seed 1 --scenario stream-steady --duration 8760h
# The hub's threads: 1..64, and one with a shared store (--redis).
check "--threads: Value 0 not in range 1 to 64" -- hub --threads 0
check "--threads: Value 65 not in range 1 to 64" -- hub --threads 65
check "--threads: more than 1 with --redis is not supported" -- hub --threads 2 --redis 127.0.0.1:6379
# A shorthand that contradicts --params is a conflict, not a silent override;
# a fault entry names worker, at and length (an empty clock step was a no-op).
check '--algorithm: core conflicts with "algorithm": "seed"' -- run --seed 1 --algorithm core --params '{"algorithm":"seed"}'
check '--expiry: counter conflicts with "expiry": "wall"' -- run --seed 1 --expiry counter --params '{"expiry":"wall"}'
check 'clock_steps\[0\]\.worker: missing' -- run --seed 1 --params '{"clock_steps":[{}]}'
check 'clock_steps\[0\]\.length must not be 0s' -- run --seed 1 --params '{"clock_steps":[{"worker":0,"at":"1m","length":"0s"}]}'
check 'pauses\[0\]\.length: missing' -- run --seed 1 --params '{"pauses":[{"worker":0,"at":"1m"}]}'
# Agreeing values are fine.
"$binary" run --seed 1 --duration 1m --algorithm core --params '{"algorithm":"core"}' >/dev/null ||
  { echo "FAIL agreeing --algorithm and --params" >&2; failures=$((failures + 1)); }
# Flags take no value and are not caught by the check.
"$binary" run --seed 1 --duration 2m --inline-checks >/dev/null || { echo "FAIL a run with a flag" >&2; failures=$((failures + 1)); }
if ((failures > 0)); then
  echo "cli_option_values: $failures failed" >&2
  exit 1
fi
echo "cli_option_values: all passed"
