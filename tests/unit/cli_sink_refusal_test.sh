#!/usr/bin/env bash
# tests/unit/cli_sink_refusal_test.sh LEASEPROOF: `subscribe --sink FILE` given
# a file that is not a sink (JSON without a newline, random bytes, a number
# past its range, a line too long) exits 2 naming the file and the line, and
# leaves the file byte for byte as it was. It used to cut such a file to zero
# bytes (a last line without a newline was taken for a torn append) and to
# wrap an epoch of 10^23 around. A torn append of a real sink is still cut.
set -uo pipefail
binary=${1:?usage: cli_sink_refusal_test.sh LEASEPROOF}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL $*" >&2
  failures=$((failures + 1))
}
# The hub address is a closed port: a sink that is refused never gets that far.
subscribe() {  # FILE
  timeout 20 "$binary" subscribe ws://127.0.0.1:9/ --channel c1 --sink "$1" --duration 200ms 2>&1
}
refused() {  # NAME PATTERN: the file $work/NAME is refused and unchanged
  local name=$1 pattern=$2 file=$work/$1 output status
  cp "$file" "$work/$name.before"
  output=$(subscribe "$file")
  status=$?
  if [[ $status -ne 2 ]] || ! grep -qE -- "$pattern" <<<"$output"; then
    fail "$name: exit $status, expected 2 and '$pattern': $(head -n 2 <<<"$output")"
  elif ! cmp -s "$file" "$work/$name.before"; then
    fail "$name: refused, but the file changed ($(stat -c %s "$file") bytes, was $(stat -c %s "$work/$name.before"))"
  else
    echo "PASS $name: $(grep -m1 'sink' <<<"$output")"
  fi
}
printf '{"channel":"c1","epoch":7}' >"$work/json-no-newline"
refused json-no-newline "sink .*json-no-newline: line 1 holds a byte other than a digit or a space"
head -c 4096 /dev/urandom >"$work/random-bytes"
printf '\x01' >>"$work/random-bytes"  # not all digits and spaces, whatever urandom gave
refused random-bytes "sink .*random-bytes: line [0-9]+ (holds a byte other than a digit|is longer than)"
printf '1 1\n1 2\n100000000000000000000000 3\n' >"$work/epoch-past-range"
refused epoch-past-range "sink .*epoch-past-range: line 3 '100000000000000000000000 3' is not '<epoch> <seq>' in range"
printf '1 1\n1 99999999999999999999\n' >"$work/seq-past-range"
refused seq-past-range "line 2 '1 99999999999999999999' is not '<epoch> <seq>' in range"
printf '0 5\n' >"$work/epoch-zero"
refused epoch-zero "line 1 '0 5' is not '<epoch> <seq>' in range"
printf '1 2 3\n' >"$work/three-numbers"
refused three-numbers "line 1 '1 2 3' is not '<epoch> <seq>' in range"
printf '1 1\n 12' >"$work/torn-not-a-line"
refused torn-not-a-line "line 2 ' 12' \(no newline\) is not the start of"
printf '%045d\n' 1 >"$work/long-line"
refused long-line "line 1 is longer than 40 bytes"

# A real sink with a torn last line: accepted, the torn part cut off.
printf '7 1\n7 2\n7 3\n7 4' >"$work/torn-sink"
output=$(subscribe "$work/torn-sink")
status=$?
if grep -q "resumes after 7:3" <<<"$output" && [[ $(cat "$work/torn-sink") == $'7 1\n7 2\n7 3' ]]; then
  echo "PASS torn-sink: resumes after 7:3, the torn '7 4' cut off (exit $status: the hub is not there)"
else
  fail "torn-sink: exit $status, expected 'resumes after 7:3' and 3 lines left: $(head -n 3 <<<"$output"); file: $(od -c "$work/torn-sink" | head -3)"
fi

if ((failures > 0)); then
  echo "cli_sink_refusal: $failures failed" >&2
  exit 1
fi
echo "cli_sink_refusal: all passed"
