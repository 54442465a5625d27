#!/usr/bin/python3
"""The stream lab on real processes (docs/runtime.md, "The lab").

Starts `leaseproof hub`, `relay` and `subscribe` as separate processes on
loopback ports the system picks, runs seed 004's checks plus a reconnect wave,
prints one verdict line per check with its figures, and stops every process it
started (also on failure or Ctrl-C). Exit status: 0 when every check passed,
1 when one failed, 2 on bad arguments.

  scripts/lab.py --binary build/release/cli/leaseproof
  scripts/lab.py --binary ... --only cut-twice --bug-cursor-on-receive
  scripts/lab.py --binary ... --expect-exactly-once-failure   (CI: the broken
      subscriber must fail the exactly-once check, naming the numbers)
"""

import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

CHECKS = ["slow-subscriber", "relay-idle", "silent-subscriber", "cut-twice", "wave", "two-hubs"]


class LabError(Exception):
    """Something the lab itself could not do (a process did not start)."""


class Lab:
    def __init__(self, binary, workdir, verbose):
        self.binary = binary
        self.workdir = workdir
        self.verbose = verbose
        self.processes = []  # (name, Popen)
        self.counter = 0

    # ---- processes -------------------------------------------------------
    def start(self, name, args, program=None):
        self.counter += 1
        log_path = os.path.join(self.workdir, f"{self.counter:02d}-{name}.log")
        log = open(log_path, "w")
        process = subprocess.Popen([program or self.binary] + args, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        process.log_path = log_path
        process.started_at = time.monotonic()
        self.processes.append((name, process))
        if self.verbose:
            print(f"  [lab] started {name} (pid {process.pid}): {' '.join(args)}", flush=True)
        return process

    def start_listening(self, name, args):
        """Starts a process with --port-file and waits for its port."""
        port_file = os.path.join(self.workdir, f"{name}-{self.counter + 1}.port")
        process = self.start(name, args + ["--port-file", port_file])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise LabError(f"{name} exited with {process.returncode}: {tail(process.log_path)}")
            try:
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    return process, int(text)
            except FileNotFoundError:
                pass
            time.sleep(0.02)
        raise LabError(f"{name} did not listen within 10 s: {tail(process.log_path)}")

    def stop(self, process, sig=signal.SIGTERM, timeout=5):
        if process.poll() is not None:
            return process.returncode
        try:
            os.killpg(process.pid, signal.SIGCONT)
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            return process.wait(5)

    def stop_all(self):
        for _, process in reversed(self.processes):
            self.stop(process, timeout=3)
        self.processes = []

    # ---- hub helpers ----------------------------------------------------
    @staticmethod
    def http(port, method, path, timeout=10):
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.read().decode()

    def metrics(self, port):
        values = {}
        for line in self.http(port, "GET", "/metrics").splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values


def tail(path, lines=8):
    try:
        with open(path) as f:
            return " | ".join(f.read().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def read_summary(path):
    with open(path) as f:
        return json.load(f)


def wait_for(predicate, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def stats_lines(process):
    """The subscriber's JSON stats lines, with their time since its start."""
    out = []
    with open(process.log_path) as f:
        for line in f:
            if line.startswith('{"stats"'):
                out.append(json.loads(line)["stats"])
    return out


MIB = 1 << 20


# ---- the checks -------------------------------------------------------------

def check_slow_subscriber(lab, args):
    queue = 1 * MIB
    ring = 8 * MIB
    hub, port = lab.start_listening("hub", ["hub", "--queue-bytes", str(queue), "--ring-bytes", str(ring),
                                            "--publish", "live:100:256"])
    readers = lab.start("readers", ["subscribe", f"ws://127.0.0.1:{port}/", "--channel", "live", "--count", "3",
                                    "--stats-interval", "250ms", "--seed", "1"])
    lab.start("stuck", ["subscribe", f"ws://127.0.0.1:{port}/", "--channel", "bulk", "--no-read"])
    wait_for(lambda: lab.metrics(port).get("leaseproof_hub_subscribers", 0) >= 4, 5)
    time.sleep(2.0)  # the "before" window
    rss_before = rss_bytes(hub.pid)
    rss_peak = rss_before
    bulk_start = time.monotonic()
    published = 0
    for _ in range(64):  # 64 x 16 x 64 KiB = 64 MiB
        lab.http(port, "POST", "/publish?channel=bulk&count=16&size=65536")
        published += 16 * 65536
        rss_peak = max(rss_peak, rss_bytes(hub.pid))
        time.sleep(0.02)
    bulk_end = time.monotonic()
    for _ in range(20):
        rss_peak = max(rss_peak, rss_bytes(hub.pid))
        time.sleep(0.05)
    metrics = lab.metrics(port)
    closes_1013 = metrics.get('leaseproof_hub_closes_total{code="1013"}', 0)
    lab.stop(readers)
    offset = readers.started_at
    before, during = [], []
    for s in stats_lines(readers):
        at = offset + s["t_s"]
        if s["window_samples"] == 0:
            continue
        if bulk_start - 1.5 <= at < bulk_start:
            before.append(s["window_p99_ms"])
        elif bulk_start < at <= bulk_end + 0.5:
            during.append(s["window_p99_ms"])
    p99_before = max(before) if before else float("nan")
    p99_during = max(during) if during else float("nan")
    allowance = 24 * MIB  # process baseline, allocator slack, encoded frames in flight
    bound = queue + ring + allowance
    growth = rss_peak - rss_before
    problems = []
    if closes_1013 < 1:
        problems.append("the stuck subscriber was never closed with 1013")
    if growth > bound:
        problems.append(f"hub memory grew {growth / MIB:.1f} MiB, above queue + ring + allowance {bound / MIB:.0f} MiB")
    if not before or not during:
        problems.append("no latency windows before or during the bulk publish")
    elif p99_during > p99_before + 50:
        problems.append(f"the readers' p99 rose from {p99_before:.2f} ms to {p99_during:.2f} ms (over +50 ms)")
    figures = (f"{published / MIB:.0f} MiB published to a subscriber that never reads; closed with 1013: "
               f"{int(closes_1013)}; hub RSS {rss_before / MIB:.1f} -> peak {rss_peak / MIB:.1f} MiB "
               f"(growth {growth / MIB:.1f} MiB, bound: queue {queue / MIB:.0f} + ring {ring / MIB:.0f} + allowance "
               f"{allowance / MIB:.0f} MiB); readers' p99 before {p99_before:.2f} ms, during {p99_during:.2f} ms")
    return problems, figures


def check_relay_idle(lab, args):
    def run(ping, pong, seconds):
        hub, port = lab.start_listening("hub", ["hub", "--ping-interval", ping, "--pong-timeout", pong])
        relay, relay_port = lab.start_listening("relay", ["relay", "--to", f"127.0.0.1:{port}", "--idle", "2.5s"])
        summary_path = os.path.join(lab.workdir, f"relay-idle-{ping}.json")
        sub = lab.start("subscriber", ["subscribe", f"ws://127.0.0.1:{relay_port}/", "--channel", "quiet",
                                       "--duration", seconds, "--summary", summary_path, "--seed", "1"])
        sub.wait(30)
        lab.stop(relay)
        lab.stop(hub)
        with open(relay.log_path) as f:
            stopped = re.search(r"(\d+) idle cuts", f.read())
        if not stopped:
            raise LabError(f"the relay printed no counts at exit: {tail(relay.log_path)}")
        idle_cuts = int(stopped.group(1))
        return read_summary(summary_path), idle_cuts

    summary, idle_cuts = run("2s", "4s", "6s")
    control, control_cuts = run("4s", "4s", "4s")
    problems = []
    if idle_cuts:
        problems.append(f"the relay cut the connection {idle_cuts} time(s) although pings cross it every 2 s")
    if summary["connects"] != 1:
        problems.append(f"the subscriber connected {summary['connects']} times, expected once")
    if control_cuts < 1:
        problems.append("control: with pings every 4 s the relay never cut (the check cannot fail)")
    figures = (f"6 s of publisher silence behind a 2.5 s idle cut-off, pings every 2 s: {idle_cuts} idle cuts, "
               f"{summary['connects']} connect(s); control with pings every 4 s: {control_cuts} idle cut(s), "
               f"{control['connects']} connects")
    return problems, figures


def check_silent_subscriber(lab, args):
    hub, port = lab.start_listening("hub", ["hub", "--ping-interval", "2s", "--pong-timeout", "4s"])
    sub = lab.start("subscriber", ["subscribe", f"ws://127.0.0.1:{port}/", "--channel", "quiet", "--seed", "1"])
    wait_for(lambda: lab.metrics(port).get("leaseproof_hub_subscribers", 0) >= 1, 5)
    time.sleep(0.5)
    os.killpg(sub.pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    closed = wait_for(lambda: lab.metrics(port).get('leaseproof_hub_closes_total{code="1006"}', 0) >= 1, 10, 0.02)
    cut_after = time.monotonic() - stopped_at
    lab.stop(sub)
    problems = []
    if not closed:
        problems.append("the hub never closed the stopped subscriber")
    elif cut_after > 6.0 + 0.25:
        problems.append(f"closed {cut_after:.2f} s after SIGSTOP, above 6 s (ping 2 s + pong timeout 4 s) + 0.25 s slack")
    figures = f"subscriber SIGSTOPped; the hub closed it with 1006 after {cut_after:.2f} s (bound 6 s = ping 2 s + pong timeout 4 s)"
    return problems, figures


def exactly_once(sink_path, epoch, n):
    """(missing, repeated, foreign) sequence numbers of the sink against 1..n."""
    seen = {}
    foreign = 0
    with open(sink_path) as f:
        for line in f:
            e, s = line.split()
            if int(e) != epoch:
                foreign += 1
                continue
            seen[int(s)] = seen.get(int(s), 0) + 1
    missing = [s for s in range(1, n + 1) if s not in seen]
    repeated = sorted(s for s, count in seen.items() if count > 1)
    extra = sorted(s for s in seen if s > n)
    return missing, repeated, foreign + len(extra)


def ranges(numbers, limit=6):
    out, i = [], 0
    while i < len(numbers) and len(out) < limit:
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        out.append(str(numbers[i]) if i == j else f"{numbers[i]}..{numbers[j]}")
        i = j + 1
    return ", ".join(out) + (" ..." if i < len(numbers) else "")


def check_cut_twice(lab, args):
    n = 800
    hub, port = lab.start_listening("hub", ["hub"])
    relay, relay_port = lab.start_listening("relay", ["relay", "--to", f"127.0.0.1:{port}", "--idle", "30s"])
    sink = os.path.join(lab.workdir, "cut-twice.sink")
    summary_path = os.path.join(lab.workdir, "cut-twice.json")
    extra = ["--bug-cursor-on-receive"] if args.bug_cursor_on_receive else []
    sub = lab.start("subscriber", ["subscribe", f"ws://127.0.0.1:{relay_port}/", "--channel", "cut", "--sink", sink,
                                   "--record-linger", "200ms", "--record-batch", "99", "--until-seq", str(n),
                                   "--summary", summary_path, "--seed", "1", "--reconnect-base", "300ms"] + extra)
    wait_for(lambda: lab.metrics(port).get("leaseproof_hub_subscribers", 0) >= 1, 5)
    epoch = int(lab.metrics(port)["leaseproof_hub_epoch"])
    cuts = 0
    start = time.monotonic()
    for i in range(n // 10):  # 10 messages every 25 ms: 400 a second for 2 s
        lab.http(port, "POST", "/publish?channel=cut&count=10&size=64")
        elapsed = time.monotonic() - start
        if (cuts == 0 and elapsed >= 0.6) or (cuts == 1 and elapsed >= 1.3):
            os.killpg(relay.pid, signal.SIGUSR1)
            cuts += 1
        time.sleep(0.025)
    try:
        sub.wait(20)
    except subprocess.TimeoutExpired:
        lab.stop(sub)
    summary = read_summary(summary_path) if os.path.exists(summary_path) else {}
    with open(relay.log_path) as f:
        forced = [int(m.group(1)) for m in re.finditer(r"cut (\d+) connections", f.read())]
    missing, repeated, foreign = exactly_once(sink, epoch, n)
    problems = []
    if len(forced) != 2 or min(forced) < 1:
        problems.append(f"the relay was to cut a live connection twice; it cut {forced}")
    if missing:
        problems.append(f"exactly once: {len(missing)} sequence numbers missing from the sink: {ranges(missing)}")
    if repeated:
        problems.append(f"exactly once: {len(repeated)} sequence numbers recorded twice or more: {ranges(repeated)}")
    if foreign:
        problems.append(f"{foreign} records outside 1..{n} of epoch {epoch}")
    figures = (f"{n} messages published at 400/s, the stream cut twice ({forced}); subscriber connects "
               f"{summary.get('connects', '?')}; sink: {n - len(missing)} of 1..{n} present, {len(missing)} missing, "
               f"{len(repeated)} repeated{' (broken subscriber: cursor on receipt)' if args.bug_cursor_on_receive else ''}")
    return problems, figures


def simulated_wave_peak(lab, jitter):
    params = json.dumps({"jitter": jitter})
    out = subprocess.run([lab.binary, "run", "--scenario", "stream-wave", "--seed", "1", "--params", params],
                         capture_output=True, text=True, timeout=120).stdout
    m = re.search(r"peak (\d+) per second", out)
    return int(m.group(1)) if m else None


def check_wave(lab, args):
    count = args.wave_subscribers

    def run(jitter):
        hub, port = lab.start_listening("hub", ["hub", "--admin"])
        summary_path = os.path.join(lab.workdir, f"wave-{'jitter' if jitter else 'nojitter'}.json")
        flags = [] if jitter else ["--no-jitter"]
        sub = lab.start("wave", ["subscribe", f"ws://127.0.0.1:{port}/", "--channel", "wave", "--count", str(count),
                                 "--reconnect-base", "1s", "--restart-base", "10s", "--reconnect-cap", "30s",
                                 "--summary", summary_path, "--seed", "1"] + flags)
        if not wait_for(lambda: lab.metrics(port).get("leaseproof_hub_subscribers", 0) >= count, 30, 0.2):
            raise LabError(f"only {lab.metrics(port).get('leaseproof_hub_subscribers', 0):.0f} of {count} subscribed")
        accepted_before = lab.metrics(port)["leaseproof_hub_subscribes_total"]
        lab.http(port, "POST", "/admin/close-all?code=1012")
        back = wait_for(lambda: lab.metrics(port)["leaseproof_hub_subscribes_total"] - accepted_before >= count, 25, 0.2)
        lab.stop(sub)
        lab.stop(hub)
        summary = read_summary(summary_path)
        return summary["wave"], bool(back)

    jitter, back_j = run(True)
    plain, back_p = run(False)
    sim_jitter = simulated_wave_peak(lab, True)
    sim_plain = simulated_wave_peak(lab, False)
    problems = []
    for name, wave, back in (("full jitter", jitter, back_j), ("no jitter", plain, back_p)):
        if not back or wave["reconnects"] != count:
            problems.append(f"{name}: {wave['reconnects']} of {count} reconnected")
    tolerance = 0.35
    if sim_jitter is None or sim_plain is None:
        problems.append("the simulated stream-wave printed no peak")
    else:
        if abs(jitter["peak_per_second"] - sim_jitter) > tolerance * sim_jitter:
            problems.append(f"full jitter: real peak {jitter['peak_per_second']}/s is not within 35% of the simulated {sim_jitter}/s")
        if plain["peak_per_second"] < 0.9 * count:
            problems.append(f"no jitter: real peak {plain['peak_per_second']}/s; expected nearly all {count} at once")
    figures = (f"{count} subscribers closed with 1012 (reconnect base 10 s): peak reconnects per second "
               f"full jitter {jitter['peak_per_second']} (simulated {sim_jitter}), "
               f"no jitter {plain['peak_per_second']} (simulated {sim_plain})")
    return problems, figures


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_two_hubs(lab, args):
    """Two hubs sharing channels and rings through Redis; the subscriber's hub
    is killed while publishing; it resumes on the other."""
    n = 800
    redis_server = shutil.which("redis-server")
    if not redis_server:
        raise LabError("redis-server is not installed (scripts/setup.sh tests installs it)")
    redis_port = free_port()
    lab.start("redis", ["--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
              program=redis_server)

    def redis_up():
        try:
            with socket.create_connection(("127.0.0.1", redis_port), timeout=0.2):
                return True
        except OSError:
            return False

    if not wait_for(redis_up, 10):
        raise LabError("redis-server did not listen within 10 s")
    shared = ["--redis", f"127.0.0.1:{redis_port}", "--epoch", "1", "--ping-interval", "1s", "--pong-timeout", "2s"]
    hub_a, port_a = lab.start_listening("hub-a", ["hub"] + shared)
    # --control-unshared: hub B keeps its own store (another key prefix), so
    # what is published into it never reaches A: the check must then fail.
    hub_b, port_b = lab.start_listening("hub-b", ["hub"] + shared +
                                        (["--redis-prefix", "unshared"] if args.control_unshared else []))
    relay, relay_port = lab.start_listening("relay", ["relay", "--to", f"127.0.0.1:{port_a}", "--to",
                                                      f"127.0.0.1:{port_b}", "--idle", "30s"])
    sink = os.path.join(lab.workdir, "two-hubs.sink")
    summary_path = os.path.join(lab.workdir, "two-hubs.json")
    sub = lab.start("subscriber", ["subscribe", f"ws://127.0.0.1:{relay_port}/", "--channel", "shared", "--sink", sink,
                                   "--until-seq", str(n), "--summary", summary_path, "--seed", "1",
                                   "--reconnect-base", "300ms"])
    if not wait_for(lambda: lab.metrics(port_a).get("leaseproof_hub_subscribers", 0) >= 1, 5):
        raise LabError("the subscriber did not reach hub A through the relay")
    epoch = int(lab.metrics(port_b)["leaseproof_hub_epoch"])
    on_a_at_kill = 0
    killed = False
    start = time.monotonic()
    for _ in range(n // 10):  # into hub B, 400 a second; hub A is killed at 0.6 s
        lab.http(port_b, "POST", "/publish?channel=shared&count=10&size=64")
        if not killed and time.monotonic() - start >= 0.6:
            on_a_at_kill = int(lab.metrics(port_a).get("leaseproof_hub_subscribers", 0))
            published_at_kill = int(lab.metrics(port_a)["leaseproof_hub_published_total"])
            with open(sink) as f:
                recorded_at_kill = sum(1 for _ in f)
            os.killpg(hub_a.pid, signal.SIGKILL)
            killed = True
        time.sleep(0.025)
    try:
        sub.wait(20)
    except subprocess.TimeoutExpired:
        lab.stop(sub)
    summary = read_summary(summary_path) if os.path.exists(summary_path) else {}
    lab.stop(relay)
    with open(relay.log_path) as f:
        stopped = re.search(r"(\d+) failovers", f.read())
    failovers = int(stopped.group(1)) if stopped else -1
    missing, repeated, foreign = exactly_once(sink, epoch, n)
    resets = summary.get("resets", {})
    problems = []
    if on_a_at_kill != 1:
        problems.append(f"hub A held {on_a_at_kill} subscribers when it was killed, expected the one")
    if killed and recorded_at_kill == 0:
        problems.append("the subscriber recorded nothing while on hub A: what was published into B never reached A")
    if failovers < 1:
        problems.append(f"the relay reports {failovers} failovers to hub B, expected at least 1")
    if resets:
        problems.append(f"the subscriber got resets {resets}; resuming on hub B should need none")
    if missing:
        problems.append(f"exactly once: {len(missing)} sequence numbers missing from the sink: {ranges(missing)}")
    if repeated:
        problems.append(f"exactly once: {len(repeated)} sequence numbers recorded twice or more: {ranges(repeated)}")
    if foreign:
        problems.append(f"{foreign} records outside 1..{n} of epoch {epoch}")
    figures = (f"hubs A and B share Redis (epoch {epoch}); {n} messages published into B at 400/s; A killed (SIGKILL) "
               f"holding the subscriber after it had {published_at_kill if killed else '?'} messages "
               f"({recorded_at_kill if killed else '?'} recorded by the subscriber); relay failovers "
               f"{failovers}; subscriber connects {summary.get('connects', '?')}, resets {resets or 'none'}; sink: "
               f"{n - len(missing)} of 1..{n} present, {len(missing)} missing, {len(repeated)} repeated")
    return problems, figures


CHECK_FUNCTIONS = {
    "slow-subscriber": check_slow_subscriber,
    "relay-idle": check_relay_idle,
    "silent-subscriber": check_silent_subscriber,
    "cut-twice": check_cut_twice,
    "wave": check_wave,
    "two-hubs": check_two_hubs,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True, help="the leaseproof binary")
    parser.add_argument("--only", action="append", choices=CHECKS, help="run only this check (repeatable)")
    parser.add_argument("--wave-subscribers", type=int, default=1000, help="subscribers in the wave (1..5000)")
    parser.add_argument("--bug-cursor-on-receive", action="store_true",
                        help="run the subscribers with the deliberately broken cursor (cut-twice must then fail)")
    parser.add_argument("--expect-exactly-once-failure", action="store_true",
                        help="with --bug-cursor-on-receive: pass only if cut-twice fails its exactly-once check")
    parser.add_argument("--control-unshared", action="store_true",
                        help="two-hubs with hub B on its own store: the check must fail (shows it can)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, sinks, summaries)")
    parser.add_argument("--verbose", action="store_true", help="print every process started")
    args = parser.parse_args()
    if not (1 <= args.wave_subscribers <= 5000):
        parser.error("--wave-subscribers: expected 1..5000")
    if not os.access(args.binary, os.X_OK):
        parser.error(f"--binary: {args.binary} is not an executable file")
    if args.expect_exactly_once_failure and not args.bug_cursor_on_receive:
        parser.error("--expect-exactly-once-failure goes with --bug-cursor-on-receive")
    # A wave holds two sockets per subscriber in the hub and the subscriber processes.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, 4 * args.wave_subscribers + 256))
    if wanted > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))

    workdir = tempfile.mkdtemp(prefix="leaseproof-lab-")
    lab = Lab(args.binary, workdir, args.verbose)

    def interrupted(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    checks = args.only or CHECKS
    failed = 0
    exactly_once_failures = []
    try:
        for name in checks:
            started = time.monotonic()
            try:
                problems, figures = CHECK_FUNCTIONS[name](lab, args)
            except (LabError, OSError, subprocess.SubprocessError, KeyError, ValueError) as e:
                problems, figures = [f"the lab could not run it: {e}"], ""
            finally:
                lab.stop_all()
            verdict = "FAIL" if problems else "PASS"
            failed += bool(problems)
            print(f"{verdict} {name} ({time.monotonic() - started:.1f} s): {figures}", flush=True)
            for problem in problems:
                print(f"    {problem}", flush=True)
            if name == "cut-twice":
                exactly_once_failures = [p for p in problems if p.startswith("exactly once")]
    except KeyboardInterrupt:
        print("lab: interrupted; stopping every process it started", file=sys.stderr)
        lab.stop_all()
        return 130
    finally:
        lab.stop_all()
        if args.keep or failed:
            print(f"lab: logs in {workdir}")
        else:
            subprocess.run(["rm", "-rf", workdir])
    if args.expect_exactly_once_failure:
        if exactly_once_failures:
            print("lab: the broken subscriber failed the exactly-once check, as it must")
            return 0
        print("lab: the broken subscriber passed the exactly-once check: the check proves nothing", file=sys.stderr)
        return 1
    print(f"lab: {len(checks) - failed} of {len(checks)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
