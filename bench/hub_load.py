#!/usr/bin/python3
"""Load on the real hub: connections opened step by step (docs/benchmarks.md,
"The hub under load").

At each step (1,000, 5,000, 10,000 subscribers by default, all on one channel,
in one `leaseproof subscribe --count N` process) it reports:
  - the hub's resident memory per idle connection (RSS growth over the hub's
    RSS with no connection, divided by N);
  - the fan-out of one 256-byte message: publish one, wait until every
    subscriber has it; the time is the slowest subscriber's publish-to-receive
    latency (the subscribers' process shares the machine's cores with the
    hub: their own reading is part of the figure), over --messages messages
    (median and max); beside it the hub's own figure, from its
    leaseproof_hub_fanout_seconds (exact mean, and bucket bounds);
  - deliveries per second: a burst of --burst messages, N x burst data frames
    written, divided by the time the hub took to write them, and the hub's
    CPU time (user and system, all threads) per frame written;
  - the hub's side alone: --messages single messages to N more subscribers
    that never read (the kernel's buffers take the frames; no subscriber
    process competes for the cores), its fan-out histogram's mean and p99;
  - the hub's resident memory per connection with a full queue: those
    subscribers each sent messages until its queue is nearly full (the
    frames are shared by all: what grows is per-connection state).
Every subscriber's sequence numbers are checked: each single message and
each burst message is read and recorded exactly once by every subscriber, or
the step fails.

--threads N runs the hub on N threads (its shards); --hub-cpus and
--subscriber-cpus pin the hub and the subscribers' process to CPU lists
(`taskset -c`), e.g. the hub on CPU 0 and the subscribers on CPU 1.
Stops every process it started, also on failure or Ctrl-C.

  bench/hub_load.py --binary build/release/cli/leaseproof [--steps 1000,5000,10000]
      [--threads 1] [--hub-cpus 0 --subscriber-cpus 1]
"""

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

MIB = 1 << 20


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid):
    """(user, system) CPU seconds of a process and all its threads so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks


def http(port, method, path):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                     data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def metrics(port):
    out = {}
    for line in http(port, "GET", "/metrics").splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def fanout_quantiles(before, after):
    """The hub's own fan-out times of the messages published between two
    /metrics readings (leaseproof_hub_fanout_seconds: publish accepted to the
    last subscriber's frame's write completed), as bucket upper bounds in
    ms: {"count", "p50", "p99"} (p = the smallest bound holding that share),
    and their exact mean in ms ("mean", from the histogram's sum)."""
    prefix = 'leaseproof_hub_fanout_seconds_bucket{le="'
    buckets = []
    for name, value in after.items():
        if name.startswith(prefix):
            bound = name[len(prefix):-2]
            buckets.append((float("inf") if bound == "+Inf" else float(bound), value - before.get(name, 0)))
    buckets.sort()
    count = buckets[-1][1] if buckets else 0
    out = {"count": int(count)}
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        out[label] = next((bound * 1000 for bound, cumulative in buckets if count and cumulative >= q * count), None)
    total = after.get("leaseproof_hub_fanout_seconds_sum", 0) - before.get("leaseproof_hub_fanout_seconds_sum", 0)
    out["mean"] = total * 1000 / count if count else None
    return out


def check_exactly_once(what, summary, n, messages):
    """Every one of n subscribers read and recorded each of `messages` once:
    a gap resumes and replays (more reads than records), a loss records fewer."""
    want = n * messages
    if summary["received"] != want or summary["recorded"] != want or summary.get("resets"):
        raise RuntimeError(f"{what}: {n} subscribers x {messages} messages = {want}, but {summary['received']} read, "
                           f"{summary['recorded']} recorded, resets {summary.get('resets')}")


def wait_for(predicate, timeout, step=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


class Processes:
    def __init__(self, binary, workdir):
        self.binary, self.workdir, self.started = binary, workdir, []

    def start(self, name, args, cpus=None):
        log = open(os.path.join(self.workdir, f"{len(self.started):02d}-{name}.log"), "w")
        pin = ["taskset", "-c", cpus] if cpus else []
        p = subprocess.Popen(pin + [self.binary] + args, stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        self.started.append(p)
        return p

    def stop(self, p):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)

    def stop_all(self):
        for p in reversed(self.started):
            self.stop(p)


def step(procs, n, args):
    port_file = os.path.join(procs.workdir, f"hub-{n}.port")
    threads = ["--threads", str(args.threads)] if args.threads else []
    hub = procs.start("hub", ["hub", "--port-file", port_file, "--connections-max", "30000", "--epoch", "1",
                              "--ping-interval", "30s", "--pong-timeout", "30s", "--write-deadline", "60s"] + threads,
                      args.hub_cpus)
    if not wait_for(lambda: os.path.exists(port_file), 10, 0.02):
        raise RuntimeError("the hub did not start")
    port = int(open(port_file).read())
    time.sleep(0.3)
    base = rss(hub.pid)
    summary_path = os.path.join(procs.workdir, f"sub-{n}.json")
    sub = procs.start("subscribe", ["subscribe", f"ws://127.0.0.1:{port}/", "--channel", "fan", "--count", str(n),
                                    "--summary", summary_path, "--hub-silence", "120s", "--seed", "1"],
                      args.subscriber_cpus)
    if not wait_for(lambda: metrics(port)["leaseproof_hub_subscribers"] >= n, 120, 0.25):
        raise RuntimeError(f"only {metrics(port)['leaseproof_hub_subscribers']:.0f} of {n} subscribed")
    time.sleep(1.0)
    idle = rss(hub.pid)
    # Fan-out: one 256-byte message at a time, each delivered to all before the next.
    before_fan = metrics(port)
    for i in range(args.messages):
        written = metrics(port)["leaseproof_hub_data_frames_written_total"]
        http(port, "POST", "/publish?channel=fan&count=1&size=256")
        wait_for(lambda: metrics(port)["leaseproof_hub_data_frames_written_total"] >= written + n, 30, 0.01)
        time.sleep(0.2)
    hub_fan = fanout_quantiles(before_fan, metrics(port))
    procs.stop(sub)  # its summary holds the single messages' latencies only
    fan = json.load(open(summary_path))
    check_exactly_once("fan-out", fan, n, args.messages)
    # Burst: deliveries per second, to a fresh set of n subscribers.
    burst_summary = os.path.join(procs.workdir, f"burst-{n}.json")
    sub = procs.start("subscribe", ["subscribe", f"ws://127.0.0.1:{port}/", "--channel", "burst", "--count", str(n),
                                    "--summary", burst_summary, "--hub-silence", "120s", "--seed", "2",
                                    "--until-seq", str(args.burst)], args.subscriber_cpus)
    if not wait_for(lambda: metrics(port)["leaseproof_hub_subscribers"] >= n, 120, 0.25):
        raise RuntimeError("the burst subscribers did not subscribe")
    written = metrics(port)["leaseproof_hub_data_frames_written_total"]
    started = time.monotonic()
    cpu_before = cpu_seconds(hub.pid)
    http(port, "POST", f"/publish?channel=burst&count={args.burst}&size=256")
    wait_for(lambda: metrics(port)["leaseproof_hub_data_frames_written_total"] >= written + n * args.burst, 120, 0.01)
    burst_s = time.monotonic() - started
    cpu_after = cpu_seconds(hub.pid)
    frames = n * args.burst
    burst_user_us, burst_system_us = ((after - before) * 1e6 / frames for before, after in zip(cpu_before, cpu_after))
    # --until-seq: the process exits once every client recorded the whole burst.
    if not wait_for(lambda: sub.poll() is not None, 120, 0.05):
        raise RuntimeError("the burst subscribers did not all record the burst")
    check_exactly_once("burst", json.load(open(burst_summary)), n, args.burst)
    # n subscribers that never read: first the hub's side of a fan-out alone
    # (single messages whose frames the kernel's buffers take; no subscriber
    # process competes for the cores), then each queue filled to ~15/16 of
    # its 1 MiB bound.
    full = procs.start("stuck", ["subscribe", f"ws://127.0.0.1:{port}/", "--channel", "full", "--count", str(n),
                                 "--no-read", "--hub-silence", "120s"], args.subscriber_cpus)
    if not wait_for(lambda: metrics(port)["leaseproof_hub_subscribers"] >= n, 120, 0.25):
        raise RuntimeError("the stuck subscribers did not subscribe")
    time.sleep(1.0)
    before_alone = metrics(port)
    for i in range(args.messages):
        http(port, "POST", "/publish?channel=full&count=1&size=256")
        time.sleep(0.3 + n / 20000)
    hub_alone = fanout_quantiles(before_alone, metrics(port))
    before_full = rss(hub.pid)
    http(port, "POST", "/publish?channel=full&count=15&size=65536")
    time.sleep(2.0)
    after_full = rss(hub.pid)
    m = metrics(port)
    procs.stop(full)
    procs.stop(hub)
    return {
        "n": n,
        "rss_base_mib": base / MIB,
        "idle_kib_per_connection": (idle - base) / n / 1024,
        "fanout_latency_ms": {"p50": fan["latency_ms"]["p50"], "p99": fan["latency_ms"]["p99"],
                              "max": fan["latency_ms"]["max"], "samples": fan["latency_ms"]["samples"]},
        "hub_fanout_ms": hub_fan,
        "hub_fanout_to_non_readers_ms": hub_alone,
        "burst_deliveries_per_s": n * args.burst / burst_s,
        "burst_cpu_us_per_frame": {"user": burst_user_us, "system": burst_system_us},
        "full_queue_kib_per_connection": (after_full - before_full) / n / 1024,
        "queue_bytes": m["leaseproof_hub_queue_bytes"],
        "closes_1013": m.get('leaseproof_hub_closes_total{code="1013"}', 0),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--steps", default="1000,5000,10000", help="subscriber counts, comma-separated (<= 15000)")
    parser.add_argument("--messages", type=int, default=10, help="single messages for the fan-out time")
    parser.add_argument("--burst", type=int, default=20, help="messages in the throughput burst")
    parser.add_argument("--threads", type=int, default=0, help="the hub's threads (default: the hub's, its cores)")
    parser.add_argument("--hub-cpus", help="pin the hub to these CPUs (taskset -c LIST)")
    parser.add_argument("--subscriber-cpus", help="pin the subscribers' process to these CPUs (taskset -c LIST)")
    parser.add_argument("--json", help="also write the results to FILE")
    args = parser.parse_args()
    try:
        steps = [int(s) for s in args.steps.split(",")]
    except ValueError:
        parser.error("--steps: expected counts such as 1000,5000,10000")
    # One subscriber process, one source address: 15,000 keeps within its
    # 20,000 clients and loopback's ephemeral ports (32768-60999).
    if any(not 1 <= s <= 15000 for s in steps):
        parser.error("--steps: each count must be in 1..15000")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < max(steps) + 256:  # each process holds at most one step's connections at a time
        parser.error(f"--steps: the open-file limit ({hard}) is too low for {max(steps)} connections; raise it "
                     "(ulimit -Hn) or lower the steps")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    workdir = tempfile.mkdtemp(prefix="leaseproof-load-")
    procs = Processes(args.binary, workdir)
    results = []
    try:
        for n in steps:
            print(f"hub_load: {n} subscribers ...", flush=True)
            r = step(procs, n, args)
            results.append(r)
            print(f"  idle: {r['idle_kib_per_connection']:.1f} KiB per connection (hub base {r['rss_base_mib']:.1f} MiB); "
                  f"fan-out of 256 B to all: p50 {r['fanout_latency_ms']['p50']:.1f} ms, max {r['fanout_latency_ms']['max']:.1f} ms "
                  f"(hub side: mean {r['hub_fanout_ms']['mean']:.1f} ms, bucket bounds p50 <= {r['hub_fanout_ms']['p50']} ms, "
                  f"p99 <= {r['hub_fanout_ms']['p99']} ms); to subscribers that do not read: hub side mean "
                  f"{r['hub_fanout_to_non_readers_ms']['mean']:.1f} ms (p99 <= {r['hub_fanout_to_non_readers_ms']['p99']} ms); "
                  f"burst: {r['burst_deliveries_per_s']:,.0f} deliveries/s, the hub's CPU a frame "
                  f"{r['burst_cpu_us_per_frame']['user']:.1f} us user + {r['burst_cpu_us_per_frame']['system']:.1f} us "
                  f"system; full queue: "
                  f"{r['full_queue_kib_per_connection']:.1f} KiB more per connection "
                  f"(queued {r['queue_bytes'] / MIB:.0f} MiB, 1013 closes {r['closes_1013']:.0f})", flush=True)
    except KeyboardInterrupt:
        print("hub_load: interrupted", file=sys.stderr)
        return 130
    finally:
        procs.stop_all()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
