#!/usr/bin/python3
"""A real worker whose DynamoDB fails at once, with release notices queued.

Worker wa holds CONNECTIONS connections in dynalite and drains (SIGTERM): it
releases them and sends as many release notices to a FIFO queue in fauxqs.
Worker wb then starts with the same queue but a DynamoDB endpoint that
refuses every connection at once (a port nothing listens on: what an expired
certificate or a dead endpoint looks like to the client, a failure long
before the request timeout). It receives the notices and tries to acquire
each connection, and fails. For RUN_S seconds (less than one lease) its
DynamoDB calls are counted from its /metrics, and must stay within what the
simulator's request-rate property allows (properties/request_rate_checker.hpp)
within one lease: per connection named, ceil(lease / retry backoff) + ceil(lease
/ heartbeat) + ceil(lease / watch interval) + 10; reconcile pages apart. The
core holds a failure that came back in under half the request timeout until
that timeout (lease.early_failure_held), so each connection costs a request
per timeout; before it did, one worker made 1,364-1,659 calls in 6 s.

Usage: fast_failure_worker.py LEASEPROOF_BINARY
Starts dynalite and fauxqs itself (scripts/dynalite.sh, scripts/fauxqs.sh,
private state dirs) and ends every process it started, also on failure. About
15-25 s.
"""
import math
import os
import signal
import socket
import subprocess
import time

from e2e import Processes, events, fail, metrics, run_main, tail, wait_file, wait_for

CONNECTIONS = 10
RUN_S = 6.0
LEASE_S, HEARTBEAT_S, MARGIN_S, RETRY_BACKOFF_S, WATCH_S = 20, 5, 2, 0.2, 5  # the worker's defaults


def closed_port():
    """A loopback port nothing listens on: connections to it are refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(binary, workdir):
    processes = Processes(workdir)
    try:
        dynamo = processes.service("dynalite.sh", "DYNALITE_STATE_DIR", "dynalite")
        sqs = processes.service("fauxqs.sh", "FAUXQS_STATE_DIR", "fauxqs")
        subprocess.run([binary, "control", "create-tables", "--endpoint", dynamo], check=True, timeout=60,
                       capture_output=True)
        subprocess.run([binary, "control", "start", "--endpoint", dynamo, "--connections", f"c0..c{CONNECTIONS - 1}",
                        "--url", "ws://127.0.0.1:9/"], check=True, timeout=60, capture_output=True)
        subprocess.run([binary, "control", "create-queue", "--sqs-endpoint", sqs, "--queue", "releases.fifo"],
                       check=True, timeout=60, capture_output=True)
        common = ["--reconcile", "60s", "--sqs-endpoint", sqs, "--release-queue", "releases.fifo"]

        a = processes.start("wa", [binary, "worker", "--worker-id", "wa", "--endpoint", dynamo] + common)
        deadline = time.monotonic() + 30
        while sum(1 for e in events(a) if e.get("event") == "lease.open") < CONNECTIONS:
            if time.monotonic() > deadline or a.poll() is not None:
                fail(f"wa did not open {CONNECTIONS} leases within 30 s: {tail(a)}")
            time.sleep(0.2)
        os.killpg(a.pid, signal.SIGTERM)
        try:
            a.wait(20)
        except subprocess.TimeoutExpired:
            fail("wa did not exit within 20 s of SIGTERM")
        sent = sum(1 for e in events(a) if e.get("event") == "release.sent")
        if sent != CONNECTIONS:
            fail(f"wa sent {sent} release notices, expected {CONNECTIONS}: {tail(a)}")

        refused = f"http://127.0.0.1:{closed_port()}"
        b_port_file = os.path.join(workdir, "wb.port")
        b = processes.start("wb", [binary, "worker", "--worker-id", "wb", "--endpoint", refused, "--http",
                                   "127.0.0.1:0", "--port-file", b_port_file] + common)
        port = int(wait_file(b_port_file, 10))
        wait_for(b, lambda e: e.get("event") == "release.received", 15, "release.received")
        started = time.monotonic()
        before = metrics(port)
        time.sleep(RUN_S)
        after = metrics(port)
        elapsed = time.monotonic() - started

        def calls(values, kind=None):
            if kind is None:
                return int(float(values.get("leaseproof_worker_dynamo_calls_total", "0")))
            return int(float(values.get(f'leaseproof_worker_calls_total{{kind="{kind}"}}', "0")))

        total = calls(after) - calls(before)
        reconcile = calls(after, "reconcile") - calls(before, "reconcile")
        taken = sum(1 for e in events(b) if e.get("event") == "release.received" and e.get("taken") is True)
        refusals = int(float(after.get("leaseproof_worker_dynamo_ambiguous_total", "0")))
        per_connection = (math.ceil(LEASE_S / RETRY_BACKOFF_S) + math.ceil(LEASE_S / HEARTBEAT_S) +
                          math.ceil(LEASE_S / WATCH_S) + 10)
        bound = max(taken, 1) * per_connection
        print(f"wb: {taken} notices taken, {refusals} calls refused so far; in {elapsed:.1f} s (less than one "
              f"{LEASE_S} s lease) {total} DynamoDB calls, {reconcile} of them reconcile pages; the request-rate "
              f"bound within a lease: {taken} connections x {per_connection} = {bound}")
        if taken == 0 or refusals == 0:
            fail(f"the fault did not happen: {taken} notices taken, {refusals} refused calls: {tail(b)}")
        if total - reconcile > bound:
            fail(f"wb made {total - reconcile} calls about {taken} connections in {elapsed:.1f} s, more than the "
                 f"{bound} the request-rate property allows within a lease")
        os.killpg(b.pid, signal.SIGTERM)
        try:
            b.wait(20)
        except subprocess.TimeoutExpired:
            fail("wb did not exit within 20 s of SIGTERM")
        print(f"PASS fast failure: {total - reconcile} calls about {taken} connections in {elapsed:.1f} s "
              f"(bound {bound})")
    finally:
        processes.stop_all()


def main():
    return run_main("fast_failure_worker", "fast_failure_worker.py LEASEPROOF_BINARY", run)


if __name__ == "__main__":
    import sys
    sys.exit(main())
