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
tool_dir="$repo_root/tools/fauxqs"
serve_js="$tool_dir/serve.mjs"
cli_js="$tool_dir/node_modules/fauxqs/dist/app.js"  # present once installed
state_dir=${FAUXQS_STATE_DIR:-"$repo_root/build/fauxqs"}
pid_file="$state_dir/pid"
port_file="$state_dir/port"
log_file="$state_dir/fauxqs.log"
start_timeout_s=${FAUXQS_START_TIMEOUT_S:-20}
stop_timeout_s=10

die() {
  echo "fauxqs.sh: $*" >&2
  exit 1
}

ensure_node() {
  if command -v node >/dev/null && command -v npm >/dev/null; then
    return
  fi
  [[ $(id -u) -eq 0 ]] || die "node/npm missing and not root; install Debian packages: nodejs npm"
  echo "fauxqs.sh: installing nodejs npm (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
}

# npm ci writes node_modules/.package-lock.json; its age tells whether the
# install matches the current lock file.
cmd_install() {
  ensure_node
  local marker="$tool_dir/node_modules/.package-lock.json"
  if [[ -f "$marker" && -f "$cli_js" && ! "$tool_dir/package-lock.json" -nt "$marker" ]]; then
    echo "fauxqs.sh: fauxqs already installed" >&2
    return
  fi
  local node_major
  node_major=$(node -p 'process.versions.node.split(".")[0]')
  ((node_major >= 20)) || echo "fauxqs.sh: warning: node $(node -v) is older than fauxqs 1.9.2's required >= 20" >&2
  echo "fauxqs.sh: npm ci in tools/fauxqs" >&2
  (cd "$tool_dir" && npm ci --no-audit --no-fund --loglevel=error >&2) ||
    die "npm ci failed in $tool_dir (is the npm registry reachable?)"
  touch "$marker"
}

# Prints the PID of the running server recorded in the state dir, or fails.
# The command line is checked so that a recycled PID is never taken for ours.
running_pid() {
  [[ -f "$pid_file" ]] || return 1
  local pid
  pid=$(<"$pid_file")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'fauxqs/serve.mjs' || return 1
  echo "$pid"
}

free_port() {
  node -e '
    const server = require("net").createServer();
    server.listen(0, "127.0.0.1", () => { console.log(server.address().port); server.close(); });'
}

# kill -0 succeeds on a zombie (a child that exited but was not reaped yet),
# so the process state is read instead.
process_alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n "$state" && "$state" != Z ]]
}

port_answers() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Waits until the freshly started server accepts connections. Fails early if
# the process died (port taken, bad install) and shows the end of its log.
wait_until_ready() {
  local pid=$1 port=$2
  local deadline=$((SECONDS + start_timeout_s))
  until port_answers "$port"; do
    if ! process_alive "$pid"; then
      rm -f "$pid_file" "$port_file"
      tail -n 20 "$log_file" >&2 || true
      die "fauxqs exited during start (port $port); log: $log_file"
    fi
    if ((SECONDS >= deadline)); then
      kill "$pid" 2>/dev/null || true
      rm -f "$pid_file" "$port_file"
      tail -n 20 "$log_file" >&2 || true
      die "fauxqs did not accept connections on 127.0.0.1:$port within ${start_timeout_s}s; log: $log_file"
    fi
    sleep 0.05
  done
}

cmd_start() {
  if running_pid >/dev/null; then
    cmd_endpoint
    return
  fi
  [[ -f "$cli_js" ]] || die "fauxqs is not installed; run: scripts/fauxqs.sh install"
  mkdir -p "$state_dir"
  rm -f "$pid_file" "$port_file"
  local port=${FAUXQS_PORT:-}
  [[ -n "$port" ]] || port=$(free_port)
  [[ "$port" =~ ^[0-9]+$ ]] || die "invalid port '$port'"
  if port_answers "$port"; then
    die "port $port on 127.0.0.1 is already in use"
  fi
  # Queues live in memory and vanish with the process, which is what tests
  # want. Run from tool_dir so that serve.mjs resolves fauxqs there.
  (cd "$tool_dir" && exec node "$serve_js" "$port") </dev/null >"$log_file" 2>&1 &
  local pid=$!
  echo "$pid" >"$pid_file"
  echo "$port" >"$port_file"
  wait_until_ready "$pid" "$port"
  echo "http://127.0.0.1:$port"
}

cmd_stop() {
  local pid
  if ! pid=$(running_pid); then
    rm -f "$pid_file" "$port_file"
    echo "fauxqs.sh: not running" >&2
    return
  fi
  kill "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + stop_timeout_s))
  while process_alive "$pid"; do
    if ((SECONDS >= deadline)); then
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.05
  done
  rm -f "$pid_file" "$port_file"
  echo "fauxqs.sh: stopped (pid $pid)" >&2
}

cmd_endpoint() {
  running_pid >/dev/null || die "fauxqs is not running; run: scripts/fauxqs.sh start"
  echo "http://127.0.0.1:$(<"$port_file")"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  endpoint) cmd_endpoint ;;
  status) running_pid >/dev/null ;;
  *) die "usage: scripts/fauxqs.sh install|start|stop|endpoint|status" ;;
esac
