#!/usr/bin/python3
"""The fleet lab on real processes (docs/runtime.md, "Real workers").

Starts dynalite (scripts/dynalite.sh), a hub and N `leaseproof worker`
processes on loopback, creates the tables, starts C connections and publishes
into each at a rate, then does real things to real processes:
  crash  kill -9 the worker owning the most connections; recovery per
         connection = from the kill to the next owner's lease.open (worker
         logs), against the crash bound computed from the configuration;
  pause  kill -STOP another worker for longer than its lease, then -CONT: it
         must stop acting at its deadline (its sessions close with reason
         "deadline" before it records anything more), and another worker
         takes its connections over;
  twin   a second process started with a running worker's --worker-id for
         two leases and a reconcile (a force-deleted StatefulSet pod): it
         must take none of the first's leases while the first renews, and
         nobody acts at once (core: each process names itself in its leases;
         liveness: it waits for the id, worker.id_in_use).
Then it reads what the real systems recorded and decides:
  exactly once    every published sequence number of every connection is in
                  the sink table once (put mode: items keyed by seq; packed
                  mode, --record-mode packed: a pack covers seq..last_seq);
  epoch order     along each connection's sink, the lease epoch of the writer
                  never goes down (an old owner writing after a newer one took
                  over would show a lower epoch at a higher seq).
With --tls, every request to DynamoDB (workers and `control`) goes over
https: a TLS proxy (tests/real/tls_proxy.py) presents a certificate for
localhost signed by a CA the lab makes (tests/real/make_test_pki.sh), and the
workers trust that CA alone (--ca-file); the checks read dynalite directly.
Stops every process it started (also on failure or Ctrl-C). Exit status 0
when every check passed, 1 otherwise, 2 on bad arguments.

  scripts/real_lab.py --binary build/release/cli/leaseproof [--workers 3 --connections 12] [--tls]
                      [--record-mode packed --record-batch 20 --record-linger 5s]
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def lab_event(path, event, **fields):
    """Appends what the lab did, and when (CLOCK_MONOTONIC, as the workers'
    mono_ms), to a lab events file for `leaseproof check-real`."""
    fields.update(event=event, mono_ms=time.monotonic() * 1000, t_ms=int(time.time() * 1000))
    with open(path, "a") as f:
        f.write(json.dumps(fields) + "\n")


class Fleet:
    def __init__(self, binary, workdir, verbose):
        self.binary, self.workdir, self.verbose = binary, workdir, verbose
        self.processes = []
        self.events_path = os.path.join(workdir, "lab-events.jsonl")

    def start_worker(self, name, worker_id, args, events_path=None, env=None):
        """A `leaseproof worker` whose signals and exit the lab records."""
        process = self.start(name, ["worker", "--worker-id", worker_id] + args, env=env)
        process.worker_id, process.events_path = worker_id, events_path or self.events_path
        return process

    @staticmethod
    def process_fields(process):
        """worker=, and process= once its log has said it (which process of
        that worker id: check-real tells two processes of one id apart)."""
        fields = {"worker": process.worker_id}
        for e in events(process):
            if "process" in e:
                fields["process"] = e["process"]
                break
        return fields

    def signal(self, process, sig):
        """Sends `sig` to a worker's process group and records it."""
        names = {signal.SIGKILL: "lab.kill", signal.SIGSTOP: "lab.stop", signal.SIGCONT: "lab.cont"}
        if hasattr(process, "worker_id") and sig in names:
            lab_event(process.events_path, names[sig], **self.process_fields(process))
        os.killpg(process.pid, sig)

    def start(self, name, args, program=None, args0=None, env=None):
        log_path = os.path.join(self.workdir, f"{name}.log")
        argv = [program or self.binary] + ([args0] if args0 else []) + args
        process = subprocess.Popen(argv, stdout=open(log_path, "w"), stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        process.log_path = log_path
        process.name = name
        self.processes.append(process)
        if self.verbose:
            print(f"  [lab] {name} (pid {process.pid}): {' '.join(args)}", flush=True)
        return process

    def stop(self, process, timeout=5):
        if process.poll() is not None:
            return
        worker = getattr(process, "worker_id", None)
        fields = self.process_fields(process) if worker else {}
        try:
            os.killpg(process.pid, signal.SIGCONT)
            if worker:
                lab_event(process.events_path, "lab.term", **fields)
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout)
            if worker:
                lab_event(process.events_path, "lab.exit", **fields)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            if worker:
                lab_event(process.events_path, "lab.kill", **fields)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)

    def stop_all(self):
        for process in reversed(self.processes):
            self.stop(process, timeout=3)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def tail(path, lines=5):
    try:
        with open(path) as f:
            return " | ".join(f.read().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def dynamo(endpoint, operation, body):
    request = urllib.request.Request(endpoint, data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": f"DynamoDB_20120810.{operation}",
        "X-Amz-Date": "20260101T000000Z",
        # dynalite checks the header's shape, not the signature.
        "Authorization": "AWS4-HMAC-SHA256 Credential=lab/20260101/us-east-1/dynamodb/aws4_request, "
                         "SignedHeaders=host, Signature=0",
    })
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def sink_records(endpoint, table, connection, epoch):
    """[(seq, lease_epoch, recorded_by)] of one connection's sink, in seq order."""
    out, start = [], None
    while True:
        body = {"TableName": table, "KeyConditionExpression": "pk = :k", "ConsistentRead": True,
                "ExpressionAttributeValues": {":k": {"S": f"{connection}#{epoch}"}}}
        if start:
            body["ExclusiveStartKey"] = start
        answer = dynamo(endpoint, "Query", body)
        for item in answer.get("Items", []):
            # A pack (--record-mode packed) holds seq..last_seq: one entry each.
            first = int(item["seq"]["N"])
            last = int(item["last_seq"]["N"]) if "last_seq" in item else first
            for seq in range(first, last + 1):
                out.append((seq, int(item["lease_epoch"]["N"]), item["recorded_by"]["S"]))
        start = answer.get("LastEvaluatedKey")
        if not start:
            return sorted(out)


def events(process):
    out = []
    with open(process.log_path) as f:
        for line in f:
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return out


def owners(workers):
    """connection -> (worker name, epoch) of its latest lease.open, by time."""
    latest = {}
    for w in workers:
        for e in events(w):
            if e.get("event") == "lease.open":
                if e["connection"] not in latest or e["t_ms"] >= latest[e["connection"]][2]:
                    latest[e["connection"]] = (w.name, e["epoch"], e["t_ms"])
            elif e.get("event") == "lease.close":
                if e["connection"] in latest and latest[e["connection"]][0] == w.name and e["t_ms"] >= latest[e["connection"]][2]:
                    del latest[e["connection"]]
    return latest


def acting_overlaps(workers, end_mono, since_mono=0):
    """Pairs of workers acting for one connection at once, by the machine's
    monotonic clock: each worker's [lease.open, lease.close] intervals, those
    that end after `since_mono`. A worker logs a close when its core closes
    the session: a worker that was stopped (SIGSTOP) logs the close of an
    expired lease when it runs again, so its interval reaches past its
    deadline; the pause check judges that case (nothing done before the
    close), and the other checks look only after it (since_mono)."""
    intervals = {}  # connection -> [(start, end, worker, epoch)]
    for w in workers:
        open_at = {}
        for e in events(w):
            if e.get("event") == "lease.open":
                open_at[e["connection"]] = (e["mono_ms"], e["epoch"])
            elif e.get("event") == "lease.close" and e["connection"] in open_at:
                start, epoch = open_at.pop(e["connection"])
                intervals.setdefault(e["connection"], []).append((start, e["mono_ms"], w.name, epoch))
        for c, (start, epoch) in open_at.items():
            intervals.setdefault(c, []).append((start, end_mono, w.name, epoch))
    overlaps = []
    for c, spans in intervals.items():
        spans = sorted(span for span in spans if span[1] > since_mono)
        for i, a in enumerate(spans):
            for b in spans[i + 1:]:
                if b[0] < a[1] and a[2] != b[2]:
                    overlaps.append((c, a, b, min(a[1], b[1]) - b[0]))
    return overlaps


def twin_phase(fleet, args, seconds, survivors, worker_flags):
    """A second process under the worker id holding the most connections
    (w0, behind the relay, left out): while the first renews, the second
    opens none of its connections, and nobody acts at once. Returns 1 when
    a check failed."""
    time.sleep(2)
    held = owners(survivors)
    first = max([w for w in survivors if w.name != "w0"], key=lambda w: sum(1 for o in held.values() if o[0] == w.name))
    theirs = [c for c, o in held.items() if o[0] == first.name]
    start_mono = time.monotonic() * 1000
    twin = fleet.start_worker(f"{first.name}-twin", first.worker_id, worker_flags)
    twin_s = 2 * seconds["lease"] + seconds["reconcile"]
    time.sleep(twin_s)
    taken = [e["connection"] for e in events(twin) if e.get("event") == "lease.open" and e["connection"] in theirs]
    waiting = [e for e in events(twin) if e.get("event") == "worker.id_in_use"]
    overlaps = acting_overlaps(survivors + [twin], time.monotonic() * 1000, since_mono=start_mono)
    fleet.stop(twin, timeout=15)
    processes = {e.get("process") for e in events(first) + events(twin) if "process" in e}
    problems = []
    if not theirs:
        problems.append(f"{first.name} held no connection when its twin started: nothing was tested")
    if len(processes) != 2:
        problems.append(f"the two processes named {len(processes)} processes in their logs, not 2")
    if taken:
        problems.append(f"the twin opened {len(taken)} of {first.name}'s connections while it renewed: {taken[:4]}")
    if args.algorithm == "liveness" and not waiting:
        problems.append("the twin did not say that its worker id is live in another process (worker.id_in_use)")
    if overlaps:
        problems.append(f"single ownership broken: {overlaps[:2]}")
    return report(problems, f"twin: a second process with {first.name}'s worker id beside it for {twin_s:g} s "
                  f"({first.name} holding {len(theirs)} connections): it opened {len(taken)} of them"
                  + (f", said the id is in use ({len(waiting)} times)" if args.algorithm == "liveness" else "")
                  + f"; acting overlaps: {len(overlaps)}")


def start_hub(fleet, name, sessions_path):
    """A hub on a free port recording its sessions; returns (process, port)."""
    port_file = os.path.join(fleet.workdir, f"{name}.port")
    process = fleet.start(name, ["hub", "--epoch", "1", "--port-file", port_file, "--sessions", sessions_path])
    deadline = time.monotonic() + 10
    while not os.path.exists(port_file) and time.monotonic() < deadline:
        time.sleep(0.02)
    if not os.path.exists(port_file):
        raise RuntimeError(f"{name} did not listen within 10 s: {tail(process.log_path)}")
    return process, int(open(port_file).read())


def check_real(fleet, args, logs, events_path, sessions_path, extra=()):
    """`leaseproof check-real` on what the processes recorded: (exit status, output lines)."""
    argv = [args.binary, "check-real", "--events", events_path, "--sessions", sessions_path] + list(extra)
    for log in logs:
        argv += ["--events", log]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    return done.returncode, (done.stdout + done.stderr).splitlines()


def skew_run(fleet, args, endpoint, expiry, algorithm, seconds, tls_flags):
    """Two workers, then a third whose wall clock is 16 s fast (faketime), with
    a hub of their own; judged by `leaseproof check-real`."""
    tag = f"{algorithm}-{expiry}"
    table, sink = f"leases-{tag}", f"records-{tag}"
    events_path = os.path.join(fleet.workdir, f"{tag}-lab-events.jsonl")
    sessions_path = os.path.join(fleet.workdir, f"{tag}-hub-sessions.jsonl")
    hub, hub_port = start_hub(fleet, f"{tag}-hub", sessions_path)
    subprocess.run([args.binary, "control", "create-tables", "--endpoint", endpoint, "--table", table, "--sink-table",
                    sink, "--algorithm", algorithm] + tls_flags, check=True, capture_output=True, timeout=60)
    n = 6
    subprocess.run([args.binary, "control", "start", "--endpoint", endpoint, "--table", table, "--sink-table", sink,
                    "--algorithm", algorithm, "--connections", f"{tag}-0..{tag}-{n - 1}", "--url", f"ws://127.0.0.1:{hub_port}/"]
                   + tls_flags, check=True, capture_output=True, timeout=60)
    for i in range(n):
        lab_event(events_path, "control.started", connection=f"{tag}-{i}")
    flags = ["--endpoint", endpoint, "--table", table, "--sink-table", sink, "--lease", args.lease, "--heartbeat",
             args.heartbeat, "--margin", args.margin, "--reconcile", args.reconcile, "--expiry", expiry,
             "--algorithm", algorithm] + tls_flags
    workers = [fleet.start_worker(f"{tag}-w{i}", f"{tag}-w{i}", flags, events_path) for i in range(2)]
    deadline = time.monotonic() + 20
    while len(owners(workers)) < n and time.monotonic() < deadline:
        time.sleep(0.2)
    owned_before = len(owners(workers))
    env = dict(os.environ, FAKETIME="+16s", FAKETIME_DONT_FAKE_MONOTONIC="1",
               LD_PRELOAD="/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
    fast = fleet.start_worker(f"{tag}-fast", f"{tag}-fast", flags, events_path, env=env)
    time.sleep(seconds)
    for w in workers + [fast]:
        fleet.stop(w)
    fleet.stop(hub)
    status, lines = check_real(fleet, args, [w.log_path for w in workers + [fast]], events_path, sessions_path)
    stolen = sum(1 for e in events(fast) if e.get("event") == "lease.open")
    return status, lines, stolen, owned_before


def port_of(url):
    return int(url.rsplit(":", 1)[1].rstrip("/"))


def start_tls_proxy(fleet, dynalite_port):
    """A TLS proxy in front of dynalite with a certificate for localhost from
    the lab's own CA; returns the https endpoint and the flags that trust it."""
    pki = os.path.join(fleet.workdir, "pki")
    subprocess.run([os.path.join(HERE, "..", "tests", "real", "make_test_pki.sh"), pki], check=True,
                   capture_output=True, timeout=120)
    ports_path = os.path.join(fleet.workdir, "tls-proxy.ports")
    proxy = fleet.start("tls-proxy", ["--target", f"127.0.0.1:{dynalite_port}", "--port-file", ports_path,
                                      f"dynamodb={pki}/good.pem,{pki}/good.key"],
                        program="/usr/bin/python3", args0=os.path.join(HERE, "..", "tests", "real", "tls_proxy.py"))
    deadline = time.monotonic() + 10
    while not os.path.exists(ports_path):
        if time.monotonic() > deadline or proxy.poll() is not None:
            raise RuntimeError(f"the TLS proxy did not start: {tail(proxy.log_path)}")
        time.sleep(0.05)
    port = json.load(open(ports_path))["dynamodb"]
    print(f"tls: DynamoDB at https://localhost:{port} (a proxy with the lab's CA in front of dynalite)", flush=True)
    return f"https://localhost:{port}", ["--ca-file", os.path.join(pki, "ca.pem")]


def report(problems, line, limit=None):
    """Prints a check's verdict line, then its problems; 1 if it failed, else 0."""
    print(f"{'FAIL' if problems else 'PASS'} {line}", flush=True)
    for problem in problems[:limit]:
        print(f"    {problem}", flush=True)
    return 1 if problems else 0


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))] if values else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--workers", type=int, default=3, help="workers (2..10)")
    parser.add_argument("--connections", type=int, default=12, help="connections (1..500)")
    parser.add_argument("--rate", type=float, default=2.0, help="messages per second per connection (0.1..10)")
    parser.add_argument("--lease", default="6s")
    parser.add_argument("--heartbeat", default="2s")
    parser.add_argument("--margin", default="1s")
    parser.add_argument("--reconcile", default="3s")
    parser.add_argument("--notices", action=argparse.BooleanOptionalAction, default=True,
                        help="release notices over SQS (fauxqs); --no-notices leaves released leases to reconcile")
    parser.add_argument("--relay-cut", type=float, default=None, metavar="SECONDS",
                        help="how long w0's relay to DynamoDB stays cut (default: 1.5 leases + the margin)")
    parser.add_argument("--expiry", choices=["wall", "counter"], default="wall")
    parser.add_argument("--algorithm", choices=["core", "liveness"], default="core",
                        help="the workers' lease algorithm: a renew per lease (core) or one heartbeat item per worker")
    parser.add_argument("--record-mode", choices=["put", "packed"], default="put",
                        help="how workers record (transact needs TransactWriteItems, which dynalite lacks)")
    parser.add_argument("--record-batch", type=int, default=25, help="messages recorded together (1..99)")
    parser.add_argument("--record-linger", default="0s", help="how long a partial batch waits (0s..30s)")
    parser.add_argument("--skew", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the 16-s-fast-clock check (faketime): wall mode, counter mode, seed algorithm")
    parser.add_argument("--tls", action="store_true",
                        help="DynamoDB over https through a TLS proxy with the lab's own CA")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    if not 2 <= args.workers <= 10:
        parser.error("--workers: expected 2..10")
    if not 1 <= args.record_batch <= 99:
        parser.error("--record-batch: expected 1..99")
    if not re.fullmatch(r"([0-9]|[12][0-9]|30)s|[0-9]+ms", args.record_linger) or (
            args.record_linger.endswith("ms") and int(args.record_linger[:-2]) > 30000):
        parser.error("--record-linger: expected a duration from 0s to 30s, in s or ms (e.g. 5s, 500ms)")
    if not 1 <= args.connections <= 500:
        parser.error("--connections: expected 1..500")
    if not 0.1 <= args.rate <= 10:
        parser.error("--rate: expected 0.1..10")
    if not os.access(args.binary, os.X_OK):
        parser.error(f"--binary: {args.binary} is not executable")
    seconds = {a: float(getattr(args, a).rstrip("s")) for a in ("lease", "margin", "reconcile")}
    cut_s = args.relay_cut if args.relay_cut is not None else 1.5 * seconds["lease"] + seconds["margin"]
    if not 1 <= cut_s <= 600:
        parser.error("--relay-cut: expected 1..600 seconds")

    workdir = tempfile.mkdtemp(prefix="leaseproof-real-lab-")
    fleet = Fleet(args.binary, workdir, args.verbose)
    dynalite_js = os.path.join(HERE, "..", "tools", "dynalite", "node_modules", "dynalite", "cli.js")
    dynalite_port = free_port()
    dynalite_data = os.path.join(workdir, "dynalite-data")

    def start_dynalite(name):
        process = fleet.start(name, ["--host", "127.0.0.1", "--port", str(dynalite_port), "--path", dynalite_data,
                                     "--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"],
                              program="node", args0=dynalite_js)
        if not wait_port(dynalite_port, 20):
            raise RuntimeError(f"dynalite did not listen within 20 s: {tail(process.log_path)}")
        return process
    publishing = threading.Event()
    published = {}
    failed = 0
    try:
        if not os.path.exists(dynalite_js):
            raise RuntimeError("dynalite is not installed (scripts/dynalite.sh install)")
        dynalite = start_dynalite("dynalite")
        direct = endpoint = f"http://127.0.0.1:{dynalite_port}"  # the checks read `direct`
        tls_flags = []
        if args.tls:
            endpoint, tls_flags = start_tls_proxy(fleet, dynalite_port)
        sessions_path = os.path.join(workdir, "hub-sessions.jsonl")
        hub, hub_port = start_hub(fleet, "hub", sessions_path)
        hub_url = f"ws://127.0.0.1:{hub_port}/"
        subprocess.run([args.binary, "control", "create-tables", "--endpoint", endpoint] + tls_flags, check=True,
                       capture_output=True, timeout=60)
        connections = [f"c{i}" for i in range(args.connections)]
        subprocess.run([args.binary, "control", "start", "--endpoint", endpoint, "--connections",
                        f"c0..c{args.connections - 1}", "--url", hub_url] + tls_flags, check=True,
                       capture_output=True, timeout=60)
        for c in connections:
            lab_event(fleet.events_path, "control.started", connection=c)
        # Each worker may own two thirds of the connections: the fleet spreads,
        # and any two workers can carry them all.
        capacity = max(1, -(-2 * args.connections // 3))
        worker_flags = ["--endpoint", endpoint, "--lease", args.lease, "--heartbeat", args.heartbeat, "--margin",
                        args.margin, "--reconcile", args.reconcile, "--expiry", args.expiry, "--algorithm", args.algorithm, "--capacity",
                        str(capacity), "--record-mode", args.record_mode, "--record-batch", str(args.record_batch),
                        "--record-linger", args.record_linger] + tls_flags
        if args.notices:
            # Release notices through a FIFO queue in fauxqs (scripts/fauxqs.sh installs it).
            fauxqs_js = os.path.join(HERE, "..", "tools", "fauxqs", "serve.mjs")
            if not os.path.exists(os.path.join(HERE, "..", "tools", "fauxqs", "node_modules", "fauxqs")):
                raise RuntimeError("fauxqs is not installed (scripts/fauxqs.sh install)")
            fauxqs_port = free_port()
            fauxqs = fleet.start("fauxqs", [str(fauxqs_port)], program="node", args0=fauxqs_js)
            if not wait_port(fauxqs_port, 20):
                raise RuntimeError(f"fauxqs did not listen within 20 s: {tail(fauxqs.log_path)}")
            sqs = f"http://127.0.0.1:{fauxqs_port}"
            subprocess.run([args.binary, "control", "create-queue", "--sqs-endpoint", sqs, "--queue", "releases.fifo"],
                           check=True, capture_output=True, timeout=60)
            worker_flags += ["--sqs-endpoint", sqs, "--release-queue", "releases.fifo"]
        # Worker w0 reaches DynamoDB through a relay: the partition cuts it off.
        relay_port_file = os.path.join(workdir, "relay.port")
        relay = fleet.start("relay", ["relay", "--to", f"127.0.0.1:{port_of(endpoint)}", "--idle", "1h",
                                      "--port-file", relay_port_file])
        deadline = time.monotonic() + 10
        while not os.path.exists(relay_port_file) and time.monotonic() < deadline:
            time.sleep(0.02)
        relayed = ["--endpoint", f"{endpoint.rsplit(':', 1)[0]}:{int(open(relay_port_file).read())}"]
        worker_flags_w0 = [relayed[1] if f == endpoint else f for f in worker_flags]
        # w1.. first: they own everything; w0 (behind the relay) joins after.
        # w1 also serves /healthz and /metrics.
        status_port_file = os.path.join(workdir, "w1-status.port")
        workers = [None] + [fleet.start_worker(f"w{i}", f"w{i}", worker_flags +
                                               (["--http", "127.0.0.1:0", "--port-file", status_port_file] if i == 1 else []))
                            for i in range(1, args.workers)]

        def publish_loop():
            tick = 1.0 / args.rate
            while publishing.is_set():
                started = time.monotonic()
                for c in connections:
                    answer = json.loads(urllib.request.urlopen(urllib.request.Request(
                        f"http://127.0.0.1:{hub_port}/publish?channel={c}&count=1&size=64", data=b"", method="POST"),
                        timeout=10).read())
                    published[c] = answer["last_seq"]
                time.sleep(max(0.0, tick - (time.monotonic() - started)))

        publishing.set()
        publisher = threading.Thread(target=publish_loop, daemon=True)
        publisher.start()
        # Everything owned?
        deadline = time.monotonic() + 30
        while len(owners(workers[1:])) < args.connections and time.monotonic() < deadline:
            time.sleep(0.2)
        if len(owners(workers[1:])) < args.connections:
            raise RuntimeError(f"only {len(owners(workers[1:]))} of {args.connections} connections owned after 30 s")
        workers[0] = fleet.start_worker("w0", "w0", worker_flags_w0)
        time.sleep(3)

        # metrics: w1's /metrics agrees with its log; /healthz answers.
        status_port = int(open(status_port_file).read())
        metrics_text = urllib.request.urlopen(f"http://127.0.0.1:{status_port}/metrics", timeout=5).read().decode()
        health = urllib.request.urlopen(f"http://127.0.0.1:{status_port}/healthz", timeout=5).status
        values = dict(line.rsplit(" ", 1) for line in metrics_text.splitlines() if line and not line.startswith("#"))
        active = int(values.get("leaseproof_worker_active_connections", -1))
        logged = sum(1 for o in owners(workers).values() if o[0] == "w1")
        # The liveness algorithm's heartbeat is one write of the worker's item.
        heartbeat_kind = "liveness" if args.algorithm == "liveness" else "renew"
        renews = int(values.get(f'leaseproof_worker_calls_total{{kind="{heartbeat_kind}"}}', 0))
        problems = []
        if active != logged:
            problems.append(f"/metrics says {active} active connections, the log {logged}")
        if health != 200:
            problems.append(f"/healthz answered {health}")
        if renews == 0:
            problems.append("no renew counted after 3 s of ownership")
        # control owners: the lease table's owners agree with the workers' logs.
        listed = subprocess.run([args.binary, "control", "owners", "--endpoint", endpoint, "--json"] + tls_flags,
                                check=True,
                                capture_output=True, text=True, timeout=60).stdout.splitlines()
        table_owners = {row["connection"]: row["owner"] for row in map(json.loads, listed)
                        if row["owner"] and row["expires_in_ms"] > 0}
        log_owners = {c: o[0] for c, o in owners(workers).items()}
        if table_owners != log_owners:
            problems.append(f"control owners lists {len(table_owners)} held connections, the logs {len(log_owners)}; "
                            f"differing: {sorted(set(table_owners.items()) ^ set(log_owners.items()))[:4]}")
        failed += report(problems, f"metrics: w1's /metrics: {active} active connections (its log: {logged}), {renews} renews, "
              f"{values.get('leaseproof_worker_records_total', '?')} records; /healthz {health}; control owners "
              f"lists {len(table_owners)} held, as the logs say: {table_owners == log_owners}")

        # crash: kill -9 the worker owning the most.
        held = owners(workers)
        counts = {w.name: sum(1 for o in held.values() if o[0] == w.name) for w in workers}
        victim = max(workers[1:], key=lambda w: counts[w.name])
        victim_connections = [c for c, o in held.items() if o[0] == victim.name]
        killed_ms = int(time.time() * 1000)
        fleet.signal(victim, signal.SIGKILL)
        victim.wait(5)
        survivors = [w for w in workers if w is not victim]
        bound_s = seconds["lease"] + seconds["margin"] + seconds["reconcile"] + min(5.0, seconds["reconcile"]) + 2 * 2.0 + 0.2
        deadline = time.monotonic() + bound_s + 10
        while time.monotonic() < deadline:
            now_held = owners(survivors)
            if all(c in now_held and now_held[c][2] > killed_ms for c in victim_connections):
                break
            time.sleep(0.2)
        now_held = owners(survivors)
        recoveries = [(now_held[c][2] - killed_ms) / 1000 for c in victim_connections
                      if c in now_held and now_held[c][2] > killed_ms]
        problems = []
        if not victim_connections:
            problems.append(f"{victim.name} held no connection when killed: nothing was tested")
        if len(recoveries) != len(victim_connections):
            problems.append(f"{len(victim_connections) - len(recoveries)} of {len(victim_connections)} connections "
                            f"not taken over within {bound_s + 10:.1f} s")
        if recoveries and max(recoveries) > bound_s:
            problems.append(f"slowest takeover {max(recoveries):.2f} s, beyond the bound {bound_s:.1f} s")
        failed += report(problems, f"crash: kill -9 {victim.name} holding {len(victim_connections)} connections; takeover "
              f"p50 {percentile(recoveries, 0.5):.2f} s, max {max(recoveries, default=float('nan')):.2f} s; bound "
              f"{bound_s:.1f} s = lease {seconds['lease']:g} + margin {seconds['margin']:g} + reconcile "
              f"{seconds['reconcile']:g} + jitter {min(5.0, seconds['reconcile']):g} + 2 timed-out requests 4 + network 0.2")
        # A supervisor restarts the killed worker (a new incarnation, same id).
        survivors.append(fleet.start_worker(f"{victim.name}-restarted", victim.worker_id, worker_flags))
        time.sleep(2)

        # pause: SIGSTOP a survivor holding connections for 1.5 leases.
        held = owners(survivors)
        paused = max([w for w in survivors if w.name != "w0"],
                     key=lambda w: sum(1 for o in held.values() if o[0] == w.name))
        paused_connections = [c for c, o in held.items() if o[0] == paused.name]
        fleet.signal(paused, signal.SIGSTOP)
        stop_s = 1.5 * seconds["lease"] + seconds["margin"]
        time.sleep(stop_s)
        cont_ms = int(time.time() * 1000)
        fleet.signal(paused, signal.SIGCONT)
        time.sleep(3)
        after = [e for e in events(paused) if e["t_ms"] >= cont_ms]
        first_close = {}
        acted = []
        for e in after:
            c = e.get("connection")
            if c not in paused_connections:
                continue
            if e["event"] == "lease.close" and c not in first_close:
                first_close[c] = e
            elif e["event"] == "resume.recorded" and c not in first_close:
                acted.append(e)
        problems = []
        if not paused_connections:
            problems.append(f"{paused.name} held no connection when stopped: nothing was tested")
        if acted:
            problems.append(f"after SIGCONT it recorded for {len(acted)} connection(s) before closing them: "
                            f"{sorted({e['connection'] for e in acted})[:5]}")
        reasons = sorted({e["reason"] for e in first_close.values()})
        if len(first_close) != len(paused_connections):
            problems.append(f"{len(paused_connections) - len(first_close)} of its connections not closed after SIGCONT")
        now_held = owners(survivors)
        taken = [c for c in paused_connections if c in now_held and now_held[c][0] != paused.name]
        failed += report(problems, f"pause: kill -STOP {paused.name} holding {len(paused_connections)} connections for "
              f"{stop_s:g} s (lease {seconds['lease']:g} s); after SIGCONT it closed them ({', '.join(reasons) or '-'}) "
              f"before acting: {len(acted) == 0}; taken over by others: {len(taken)} of {len(paused_connections)}")

        # partition: w0 cut from DynamoDB (its relay stopped) for 1.5 leases,
        # its hub connections untouched: it must stop acting at its deadline;
        # the others take over; nobody acts at once.
        time.sleep(2)
        held = owners(survivors)
        w0 = workers[0]
        w0_connections = [c for c, o in held.items() if o[0] == "w0"]
        cut_mono = time.monotonic() * 1000
        lab_event(fleet.events_path, "lab.partition_start", worker="w0", peer="dynamodb")
        os.killpg(relay.pid, signal.SIGSTOP)
        time.sleep(cut_s)
        os.killpg(relay.pid, signal.SIGCONT)
        lab_event(fleet.events_path, "lab.partition_end", worker="w0", peer="dynamodb")
        time.sleep(3)
        closes = [e for e in events(w0) if e.get("event") == "lease.close" and e["mono_ms"] >= cut_mono]
        deadline_ms = (seconds["lease"] + 1) * 1000  # at most lease - margin after the last confirmed renew, + 1 s
        late = [e for e in closes if e["mono_ms"] - cut_mono > deadline_ms]
        overlaps = acting_overlaps(survivors, time.monotonic() * 1000, since_mono=cut_mono)
        problems = []
        if not w0_connections:
            problems.append("w0 held no connection when cut off: nothing was tested")
        if len({e["connection"] for e in closes} & set(w0_connections)) != len(w0_connections):
            problems.append(f"w0 closed {len(closes)} of its {len(w0_connections)} sessions during the partition")
        if late:
            problems.append(f"{len(late)} sessions closed later than lease + 1 s after the cut")
        if overlaps:
            problems.append(f"single ownership broken: {overlaps[:2]}")
        failed += report(problems, f"partition: w0 cut from DynamoDB for {cut_s:g} s (its "
              f"relay stopped) holding {len(w0_connections)} connections; it closed them "
              f"({', '.join(sorted({e['reason'] for e in closes})) or '-'}) within "
              f"{max((e['mono_ms'] - cut_mono for e in closes), default=0) / 1000:.2f} s of the cut; acting overlaps: "
              f"{len(overlaps)}")

        # twin: a second process with a running worker's id (a StatefulSet pod
        # force-deleted while its node still runs it), for two leases and a
        # reconcile, then drained.
        failed += twin_phase(fleet, args, seconds, survivors, worker_flags)

        # dynamodb: the endpoint stopped for 1.5 leases and restarted with its
        # data: every worker stops acting at its deadline; the fleet recovers.
        time.sleep(2)
        held_before = owners(survivors)
        outage_mono = time.monotonic() * 1000
        lab_event(fleet.events_path, "lab.crash", node="dynamodb")
        fleet.stop(dynalite)
        outage_s = 1.5 * seconds["lease"] + seconds["margin"]
        time.sleep(outage_s)
        dynalite = start_dynalite("dynalite-restarted")
        lab_event(fleet.events_path, "lab.restart", node="dynamodb")
        restart_mono = time.monotonic() * 1000
        bound_s = seconds["reconcile"] + min(5.0, seconds["reconcile"]) + 2 * 2.0 + 1.0
        deadline = time.monotonic() + bound_s + 10
        while time.monotonic() < deadline:
            if len(owners(survivors)) == args.connections:
                break
            time.sleep(0.2)
        closes = [e for w in survivors for e in events(w) if e.get("event") == "lease.close"
                  and outage_mono <= e["mono_ms"] <= restart_mono]
        reopened = owners(survivors)
        recover_s = max((e["mono_ms"] for w in survivors for e in events(w) if e.get("event") == "lease.open"
                         and e["mono_ms"] >= restart_mono), default=restart_mono) - restart_mono
        problems = []
        if not held_before:
            problems.append("no connection was owned when DynamoDB stopped: nothing was tested")
        if len({e["connection"] for e in closes}) < len(held_before):
            problems.append(f"only {len({e['connection'] for e in closes})} of {len(held_before)} sessions closed "
                            "while DynamoDB was down")
        if len(reopened) != args.connections:
            problems.append(f"{len(reopened)} of {args.connections} connections owned again "
                            f"{bound_s + 10:.0f} s after the restart")
        failed += report(problems, f"dynamodb: the endpoint stopped for {outage_s:g} s, restarted with its data; "
              f"{len({e['connection'] for e in closes})} of {len(held_before)} sessions closed during the outage "
              f"({', '.join(sorted({e['reason'] for e in closes})) or '-'}); all {len(reopened)} owned again "
              f"{recover_s / 1000:.2f} s after the restart")

        # rolling restart: every live worker drained (SIGTERM) and started
        # again, one at a time; handover per connection from the drain to the
        # next owner's lease.open.
        handovers = []
        live = list(survivors)
        for i, old in enumerate(list(live)):
            held = owners(live)
            theirs = [c for c, o in held.items() if o[0] == old.name]
            drain_mono = time.monotonic() * 1000
            fleet.stop(old, timeout=15)
            flags = worker_flags_w0 if old.name.split("-")[0] == "w0" else worker_flags
            fresh = fleet.start_worker(f"{old.name.split('-')[0]}-r", old.worker_id, flags)
            live[live.index(old)] = fresh
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                now_held = owners(live)
                if all(c in now_held and now_held[c][0] != old.name for c in theirs):
                    break
                time.sleep(0.1)
            opens = {}
            for w in live:
                if w is old:
                    continue
                for e in events(w):
                    if e.get("event") == "lease.open" and e["connection"] in theirs and e["mono_ms"] >= drain_mono:
                        opens[e["connection"]] = min(opens.get(e["connection"], 1e18), e["mono_ms"])
            handovers += [(opens[c] - drain_mono) / 1000 for c in theirs if c in opens]
            time.sleep(1)
        survivors = live
        # With notices: the notice's trip and the next receive (0.5 s poll
        # interval), plus 1 s; without: the next reconcile, plus 1 s.
        graceful_bound = 1.5 if args.notices else seconds["reconcile"] + min(5.0, seconds["reconcile"]) + 1.0
        problems = []
        if not handovers:
            problems.append("no connection changed hands in the rolling restart: nothing was tested")
        if handovers and percentile(handovers, 0.99) > graceful_bound:
            problems.append(f"handover p99 {percentile(handovers, 0.99):.2f} s beyond {graceful_bound:.1f} s")
        failed += report(problems, f"rolling restart: {len(live)} workers drained with SIGTERM one at a time and started again; "
              f"{len(handovers)} handovers, p50 {percentile(handovers, 0.5):.2f} s, p99 {percentile(handovers, 0.99):.2f} s "
              + (f"(bound with release notices: poll interval 0.5 + 1 = {graceful_bound:g} s)" if args.notices else
                 f"(bound without release notices: reconcile {seconds['reconcile']:g} + jitter "
                 f"{min(5.0, seconds['reconcile']):g} + 1 = {graceful_bound:g} s)"))

        # skew: a worker 16 s fast. Wall mode (tolerating 2 x margin) must break
        # and the lab must say so; counter mode must hold; the articles'
        # algorithm must be caught. The first two run the --algorithm chosen.
        if args.skew:
            if not os.path.exists("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"):
                raise RuntimeError("faketime is not installed (scripts/setup.sh tests installs it)")
            results = {}
            for expiry, algorithm in (("wall", args.algorithm), ("counter", args.algorithm), ("wall", "seed")):
                results[(expiry, algorithm)] = skew_run(fleet, args, endpoint, expiry, algorithm, 12, tls_flags)
            problems = []
            lines = []
            for (expiry, algorithm), (status, output, stolen, owned_before) in results.items():
                expected = algorithm == "seed" or expiry == "wall"
                violations = [line.strip() for line in output if line.strip().startswith("violation:")]
                ownership = [line for line in output if line.startswith("single ownership:")]
                lines.append(f"{algorithm}/{expiry}: check-real exit {status}, {len(violations)} violations, the fast "
                             f"worker opened {stolen} leases; {ownership[0] if ownership else '(no summary)'}")
                lines += [f"  {v}" for v in violations[:2]]
                if owned_before < 6:
                    problems.append(f"{algorithm}/{expiry}: only {owned_before} of 6 connections owned before the "
                                    "fast worker started")
                if status not in (0, 1):
                    problems.append(f"{algorithm}/{expiry}: check-real failed to run (exit {status}): {output[-3:]}")
                elif expected and status == 0:
                    problems.append(f"{algorithm}/{expiry}: check-real found no two workers acting at once; a 16 s "
                                    "fast clock must break it (the check proves nothing)")
                elif not expected and status != 0:
                    problems.append(f"{algorithm}/{expiry}: single ownership broken: {violations[:3]}")
            verdict = "FAIL" if problems else "PASS"
            failed += bool(problems)
            print(f"{verdict} skew: a worker whose wall clock is 16 s fast (faketime), margin {seconds['margin']:g} s "
                  f"(wall mode tolerates {2 * seconds['margin']:g} s): wall mode broken and reported, counter mode "
                  f"clean, the articles' algorithm caught", flush=True)
            for line in lines + [f"    {p}" for p in problems]:
                print(f"    {line}", flush=True)

        # Stop publishing, let every sink catch up, then judge the records.
        time.sleep(2)
        publishing.clear()
        publisher.join(15)
        deadline = time.monotonic() + 30
        missing_total = None
        while time.monotonic() < deadline:
            records = {c: sink_records(direct, "records", c, 1) for c in connections}
            missing_total = sum(published.get(c, 0) - len({r[0] for r in records[c]}) for c in connections)
            if missing_total <= 0:
                break
            time.sleep(1)
        problems = []
        order_breaks = []
        total = 0
        for c in connections:
            seqs = [r[0] for r in records[c]]
            total += len(seqs)
            expected = list(range(1, published.get(c, 0) + 1))
            if seqs != expected:
                missing = sorted(set(expected) - set(seqs))
                extra = len(seqs) - len(set(seqs))
                problems.append(f"exactly once: {c}: {len(missing)} missing (first {missing[:5]}), {extra} repeated, "
                                f"{len([s for s in seqs if s > len(expected)])} beyond the {len(expected)} published")
            epochs = [r[1] for r in records[c]]
            for i in range(1, len(epochs)):
                if epochs[i] < epochs[i - 1]:
                    order_breaks.append(f"{c}: seq {records[c][i][0]} by {records[c][i][2]} epoch {epochs[i]} after "
                                        f"epoch {epochs[i - 1]}")
                    break
        if order_breaks:
            problems.append(f"epoch order broken on {len(order_breaks)} connection(s): {order_breaks[:3]}")
        failed += report(problems, f"records: {sum(published.values())} published over {len(connections)} connections, {total} "
              f"in the sink; exactly once: {not any(p.startswith('exactly once') for p in problems)}; epoch order: "
              f"{not order_breaks}", limit=10)

        # The simulator's checkers on what the processes recorded: every
        # worker stopped (drained), the hub stopped (its last sessions
        # written), then `leaseproof check-real`.
        for w in survivors + [victim, paused]:
            fleet.stop(w, timeout=15)
        fleet.stop(hub)
        worker_logs = [p.log_path for p in fleet.processes if getattr(p, "worker_id", None)
                       and p.events_path == fleet.events_path]
        status, output = check_real(fleet, args, worker_logs, fleet.events_path, sessions_path,
                                    ["--notices"] if args.notices else [])
        problems = [] if status == 0 else [line for line in output if "violation:" in line][:10] or output[-5:]
        # The killed worker's takeovers must be judged by the watcher's bound
        # (the workers' lease.watch lines): a lab where no watcher was seen
        # would judge every gap by the looser sweep's bound and prove less.
        crash = [line for line in output if line.strip().startswith("crash: gaps")]
        watched = re.search(r"\((\d+) by the watcher's bound", crash[0]) if crash else None
        if status == 0 and not (watched and int(watched.group(1)) > 0):
            problems.append(f"check-real judged no crash gap by the watcher's bound: {crash[:1] or 'no crash line'}")
        # The twin must reach the checkers as a process of its own, or they
        # judged one process where two ran.
        twins = re.search(r"(\d+) processes beside another of their worker id", "\n".join(output))
        if status == 0 and not (twins and int(twins.group(1)) > 0):
            problems.append("check-real saw no second process of one worker id: the twin was not judged")
        failed += report(problems, f"check-real: the simulator's ownership and recovery checkers on {len(worker_logs)} "
                         f"worker logs, the lab's events and the hub's sessions (exit {status})")
        for line in output:
            if not line.strip().startswith(("violation:", "excused:")):
                print(f"    {line}", flush=True)
    except KeyboardInterrupt:
        print("real_lab: interrupted; stopping everything", file=sys.stderr)
        failed += 1
    except (RuntimeError, OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
        print(f"FAIL real_lab: {e}", flush=True)
        failed += 1
    finally:
        publishing.clear()
        fleet.stop_all()
        if args.keep or failed:
            print(f"real_lab: logs in {workdir}")
        else:
            subprocess.run(["rm", "-rf", workdir])
    print(f"real_lab: {'all checks passed' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    sys.exit(main())
