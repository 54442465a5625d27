#!/usr/bin/python3
"""Instructions the hub executes per delivered Data frame (callgrind), for
scripts/count-instructions.sh's `hub-frame` budget.

Runs `leaseproof hub --threads 1` under valgrind twice, each time with
--subscribers subscribers of one channel (one `leaseproof subscribe` process,
not under valgrind) and single 256-byte publishes, --few then --many of them,
each written to every subscriber before the next. The answer is the
difference of the two runs' counts over the difference of their Data frames
written: what one more frame costs the hub (its write's initiation and
completion, the core's publish share, the event loop), without the fixed
cost of starting, accepting and subscribing. The waits read the subscribers'
stats lines, never the hub, so that the hub's count holds no polling whose
amount depends on timing (one /metrics request a run, at the end). Only loopback; every process it
starts is stopped, also on failure; each run is bounded (--timeout).

  bench/hub_instructions.py --binary build/release/cli/leaseproof [--subscribers 500]

Prints one line: the instructions per frame (an integer). Exit 0, or 2 with
the reason on stderr.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from hub_load import http, wait_for  # this folder's: the same HTTP and wait helpers


def metric(port, name):
    for line in http(port, "GET", "/metrics").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise RuntimeError(f"/metrics has no {name}")


def last_stats(log_path):
    """The subscribers' latest stats line ({"received", "open", ...}), or {}."""
    last = {}
    with open(log_path) as f:
        for line in f:
            if line.startswith('{"stats"'):
                last = json.loads(line)["stats"]
    return last


def stop(p):
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)


def measure(binary, workdir, subscribers, publishes, timeout):
    """(instructions, data frames written) of one hub run under callgrind."""
    tag = f"{subscribers}x{publishes}"
    port_file, out = os.path.join(workdir, f"{tag}.port"), os.path.join(workdir, f"{tag}.callgrind")
    started = []
    try:
        with open(os.path.join(workdir, f"{tag}-hub.log"), "w") as log:
            # The hub itself, not `leaseproof`, which would exec it outside
            # callgrind's view (valgrind does not follow an exec by default).
            hub_binary = os.path.join(os.path.dirname(binary), "leaseproof-runtime")
            hub = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", hub_binary, "hub",
                                    "--threads", "1", "--port-file", port_file, "--epoch", "1",
                                    "--ping-interval", "30s", "--pong-timeout", "30s", "--write-deadline", "60s"],
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        started.append(hub)
        if not wait_for(lambda: os.path.exists(port_file) and os.path.getsize(port_file) > 0, timeout):
            raise RuntimeError("the hub did not start under valgrind")
        port = int(open(port_file).read())
        sub_log = os.path.join(workdir, f"{tag}-subscribe.log")
        with open(sub_log, "w") as log:
            sub = subprocess.Popen([binary, "subscribe", f"ws://127.0.0.1:{port}/", "--channel", "c", "--count",
                                    str(subscribers), "--until-seq", str(publishes), "--seed", "1",
                                    "--hub-silence", "120s", "--stats-interval", "20ms"],
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        started.append(sub)
        if not wait_for(lambda: last_stats(sub_log).get("open", 0) >= subscribers, timeout):
            raise RuntimeError(f"{subscribers} subscribers did not all connect in {timeout} s")
        time.sleep(1.0)  # their subscribes reach the hub (a late one would be replayed to: still counted)
        for i in range(publishes):
            http(port, "POST", "/publish?channel=c&count=1&size=256")
            want = (i + 1) * subscribers
            if not wait_for(lambda: last_stats(sub_log).get("received", 0) >= want or sub.poll() is not None,
                            timeout, 0.01):
                raise RuntimeError(f"publish {i + 1}: not every subscriber read it in {timeout} s")
        if not wait_for(lambda: sub.poll() is not None, timeout):
            raise RuntimeError("the subscribers did not all record every message")
        if sub.returncode != 0:
            raise RuntimeError(f"the subscribers exited {sub.returncode}")
        frames = metric(port, "leaseproof_hub_data_frames_written_total")
        stop(hub)
        if hub.returncode != 0:
            raise RuntimeError(f"the hub exited {hub.returncode} under valgrind")
        with open(out) as f:
            summary = re.search(r"^summary: (\d+)", f.read(), re.M)
        if not summary:
            raise RuntimeError(f"{out}: no callgrind summary")
        return int(summary.group(1)), int(frames)
    finally:
        for p in reversed(started):
            stop(p)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--subscribers", type=int, default=500, help="subscribers (1..5000)")
    parser.add_argument("--few", type=int, default=20, help="publishes of the smaller run")
    parser.add_argument("--many", type=int, default=80, help="publishes of the larger run (> --few)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds any one wait may take")
    args = parser.parse_args()
    if not 1 <= args.subscribers <= 5000:
        parser.error("--subscribers: expected 1..5000")
    if not 1 <= args.few < args.many <= 1000:
        parser.error("--few, --many: expected 1 <= few < many <= 1000")
    if not os.access(args.binary, os.X_OK):
        print(f"hub_instructions: {args.binary} is not an executable", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="leaseproof-hub-ir-") as workdir:
        try:
            few = measure(args.binary, workdir, args.subscribers, args.few, args.timeout)
            many = measure(args.binary, workdir, args.subscribers, args.many, args.timeout)
        except (RuntimeError, OSError) as error:
            print(f"hub_instructions: {error}", file=sys.stderr)
            return 2
    if many[1] <= few[1]:
        print(f"hub_instructions: the larger run wrote {many[1]} frames, the smaller {few[1]}", file=sys.stderr)
        return 2
    print((many[0] - few[0]) // (many[1] - few[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
