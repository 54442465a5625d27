#!/usr/bin/env bash
# The stream lab on real processes: installs what is needed, builds the release
# binary, and runs scripts/lab.py (hub, relay and subscribers as separate
# processes on loopback ports the system picks; docs/runtime.md, "The lab").
#   scripts/lab.sh                                   # every check, about 75 s
#   scripts/lab.sh --only cut-twice --keep           # one check; keep its logs
#   scripts/lab.sh --bug-cursor-on-receive --only cut-twice
#                                                    # the broken subscriber: fails
# Any scripts/lab.py flag works (scripts/lab.sh --help lists them). Exit status
# 0 when every check passed, 1 when one failed, 2 on bad arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
for argument in "$@"; do
  if [[ $argument == -h || $argument == --help ]]; then
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    echo
    exec /usr/bin/python3 scripts/lab.py --help
  fi
done
scripts/setup.sh >/dev/null
scripts/build.sh release --target leaseproof >/dev/null
# Debian's python3 (not a python3 earlier on PATH): the lab needs only its
# standard library, the interop test its python3-websockets.
exec /usr/bin/python3 scripts/lab.py --binary build/release/cli/leaseproof "$@"
