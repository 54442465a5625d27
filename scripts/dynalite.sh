#!/usr/bin/env bash
# scripts/dynalite.sh install|start|stop|endpoint|status
#
# Runs a local dynalite (DynamoDB-compatible server, in memory) for the tests
# labelled `real`. The version is pinned by tools/dynalite/package-lock.json.
#
#   install   npm ci in tools/dynalite, only when node_modules is missing or
#             older than the lock file (so it is fast when already installed);
#             installs Debian's nodejs and npm first if node is missing.
#   start     starts dynalite on 127.0.0.1 (port: DYNALITE_PORT, or a free one),
#             waits until it accepts connections, prints http://127.0.0.1:PORT.
#             Starting an already running server just prints its endpoint.
#   stop      stops the server recorded in the state dir; fine if none runs.
#   endpoint  prints the endpoint of the running server.
#   status    exits 0 if the server runs, 1 otherwise.
#
# Environment:
#   DYNALITE_STATE_DIR        pid/port/log files (default: build/dynalite)
#   DYNALITE_PORT             fixed port instead of a free one
#   DYNALITE_START_TIMEOUT_S  how long start waits for the port (default: 20)
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
server=dynalite
tool_dir="$repo_root/tools/dynalite"
cli_js="$tool_dir/node_modules/dynalite/cli.js"
cmdline_marker=dynalite/cli.js
state_dir=${DYNALITE_STATE_DIR:-"$repo_root/build/dynalite"}
fixed_port=${DYNALITE_PORT:-}
start_timeout_s=${DYNALITE_START_TIMEOUT_S:-20}

# No --path: tables live in memory and vanish with the process, which is what
# tests want. --createTableMs 0 makes new tables ACTIVE at once.
launch() {
  exec node "$cli_js" --host 127.0.0.1 --port "$1" --createTableMs 0 --deleteTableMs 0 --updateTableMs 0
}

source "$repo_root/scripts/node_server.sh"
node_server_main "$@"

