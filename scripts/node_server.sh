# scripts/node_server.sh: what scripts/dynalite.sh and scripts/fauxqs.sh share.
# Sourced, never run: the caller sets
#   server          its name (dynalite, fauxqs): tools/$server holds its
#                   package.json and lock file, messages say "$server.sh: ..."
#   tool_dir        tools/$server
#   cli_js          a file present once installed
#   cmdline_marker  text of the server's command line (a recycled PID is never
#                   taken for the server's)
#   state_dir       pid, port and log files
#   fixed_port      a port to use, or empty for a free one
#   start_timeout_s how long start waits for the port
#   launch PORT     a function that runs the server in the foreground on
#                   127.0.0.1:PORT
# and then calls node_server_main "$@" (install|start|stop|endpoint|status).

pid_file="$state_dir/pid"
port_file="$state_dir/port"
log_file="$state_dir/$server.log"
stop_timeout_s=10

die() {
  echo "$server.sh: $*" >&2
  exit 1
}

ensure_node() {
  if command -v node >/dev/null && command -v npm >/dev/null; then
    return
  fi
  [[ $(id -u) -eq 0 ]] || die "node/npm missing and not root; install Debian packages: nodejs npm"
  echo "$server.sh: installing nodejs npm (apt-get)" >&2
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
    echo "$server.sh: $server already installed" >&2
    return
  fi
  local node_major
  node_major=$(node -p 'process.versions.node.split(".")[0]')
  ((node_major >= 20)) || echo "$server.sh: warning: node $(node -v) is older than $server's required >= 20" >&2
  echo "$server.sh: npm ci in tools/$server" >&2
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
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$cmdline_marker" || return 1
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
      die "$server exited during start (port $port); log: $log_file"
    fi
    if ((SECONDS >= deadline)); then
      kill "$pid" 2>/dev/null || true
      rm -f "$pid_file" "$port_file"
      tail -n 20 "$log_file" >&2 || true
      die "$server did not accept connections on 127.0.0.1:$port within ${start_timeout_s}s; log: $log_file"
    fi
    sleep 0.05
  done
}

cmd_start() {
  if running_pid >/dev/null; then
    cmd_endpoint
    return
  fi
  [[ -f "$cli_js" ]] || die "$server is not installed; run: scripts/$server.sh install"
  mkdir -p "$state_dir"
  rm -f "$pid_file" "$port_file"
  local port=$fixed_port
  [[ -n "$port" ]] || port=$(free_port)
  [[ "$port" =~ ^[0-9]+$ ]] || die "invalid port '$port'"
  if port_answers "$port"; then
    die "port $port on 127.0.0.1 is already in use"
  fi
  launch "$port" </dev/null >"$log_file" 2>&1 &
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
    echo "$server.sh: not running" >&2
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
  echo "$server.sh: stopped (pid $pid)" >&2
}

cmd_endpoint() {
  running_pid >/dev/null || die "$server is not running; run: scripts/$server.sh start"
  echo "http://127.0.0.1:$(<"$port_file")"
}

node_server_main() {
  case "${1:-}" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    endpoint) cmd_endpoint ;;
    status) running_pid >/dev/null ;;
    *) die "usage: scripts/$server.sh install|start|stop|endpoint|status" ;;
  esac
}
