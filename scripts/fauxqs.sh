#!/usr/bin/env bash
# scripts/fauxqs.sh install|start|stop|endpoint|status
#
# Runs a local fauxqs (SQS-compatible server, JSON protocol, in memory) for the
# tests labelled `real` and the workers' release notices. The version is pinned
# by tools/fauxqs/package-lock.json; tools/fauxqs/serve.mjs starts it on
# 127.0.0.1 (fauxqs's own CLI binds 0.0.0.0).
#
#   install   npm ci in tools/fauxqs, only when node_modules is missing or
#             older than the lock file (so it is fast when already installed);
#             installs Debian's nodejs and npm first if node is missing.
#   start     starts fauxqs on 127.0.0.1 (port: FAUXQS_PORT, or a free one),
#             waits until it accepts connections, prints http://127.0.0.1:PORT.
#             Starting an already running server just prints its endpoint.
#   stop      stops the server recorded in the state dir; fine if none runs.
#             A second, private server: the same commands with another
#             FAUXQS_STATE_DIR (each state dir records its own pid and port).
#   endpoint  prints the endpoint of the running server.
#   status    exits 0 if the server runs, 1 otherwise.
#
# Environment:
#   FAUXQS_STATE_DIR        pid/port/log files (default: build/fauxqs)
#   FAUXQS_PORT             fixed port instead of a free one
#   FAUXQS_START_TIMEOUT_S  how long start waits for the port (default: 20)
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
server=fauxqs
tool_dir="$repo_root/tools/fauxqs"
serve_js="$tool_dir/serve.mjs"
cli_js="$tool_dir/node_modules/fauxqs/dist/app.js"  # present once installed
cmdline_marker=fauxqs/serve.mjs
state_dir=${FAUXQS_STATE_DIR:-"$repo_root/build/fauxqs"}
fixed_port=${FAUXQS_PORT:-}
start_timeout_s=${FAUXQS_START_TIMEOUT_S:-20}

# Queues live in memory and vanish with the process, which is what tests want.
# Run from tool_dir so that serve.mjs resolves fauxqs there.
launch() {
  cd "$tool_dir" && exec node "$serve_js" "$1"
}

source "$repo_root/scripts/node_server.sh"
node_server_main "$@"

