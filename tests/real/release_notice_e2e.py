#!/usr/bin/python3
"""Release notices end to end: two `leaseproof worker` processes, dynalite and fauxqs.

Worker A owns connection c0; A gets SIGTERM and drains: it releases c0 and
sends a release notice to the FIFO queue. Worker B, whose reconcile interval
(60 s) is far beyond this test, receives the notice, acts on it and opens c0.
Passes when B logs release.received (taken) then lease.open for c0 well
before its lease watch could have found the release (lease + margin -
heartbeat after it), A drained cleanly having logged release.sent, and B's
/metrics count the notice and the consumed capacity. On the way, `control
create-tables --registry-table` (run twice: existing tables are kept) has
created the connection registry's table with seed 003's keys and GSIs, and
said that dynalite cannot enable its TTL (no UpdateTimeToLive).

Usage: release_notice_e2e.py LEASEPROOF_BINARY
Starts everything on 127.0.0.1 itself (dynalite and fauxqs through
scripts/dynalite.sh and scripts/fauxqs.sh with private state dirs; both must
be installed: `scripts/dynalite.sh install`, `scripts/fauxqs.sh install`), and
ends every process it started, also on failure. About 4-12 s (the reconcile
jitter before worker B's first sweep).
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

from e2e import Processes, events, fail, metrics, run_main, tail, wait_file, wait_for

LEASE_S, HEARTBEAT_S, MARGIN_S = 10, 3, 1
# The watch finds a released lease at the earliest lease + margin after the
# last renew, which was at most a heartbeat before the release.
WATCH_EARLIEST_S = LEASE_S + MARGIN_S - HEARTBEAT_S
NOTICE_BOUND_S = 3.0  # release -> B's lease.open through the notice


def describe_registry_table(endpoint, table):
    """DescribeTable straight to the endpoint (dynalite checks no signature):
    the registry's GSIs with their key schemas, as docs/registry.md gives them."""
    request = urllib.request.Request(endpoint, data=json.dumps({"TableName": table}).encode(), headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.DescribeTable",
        "X-Amz-Date": "20260101T000000Z",
        "Authorization": "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, "
                         "SignedHeaders=host, Signature=0"})
    described = json.loads(urllib.request.urlopen(request, timeout=10).read())["Table"]
    keys = {index["IndexName"]: [(k["AttributeName"], k["KeyType"]) for k in index["KeySchema"]]
            for index in described.get("GlobalSecondaryIndexes", [])}
    expected = {"byConnection": [("connectionId", "HASH")], "byUser": [("userId", "HASH"), ("connectionId", "RANGE")]}
    if keys != expected or described["KeySchema"] != [{"AttributeName": "pk", "KeyType": "HASH"},
                                                      {"AttributeName": "sk", "KeyType": "RANGE"}]:
        fail(f"registry table {table}: key schema {described['KeySchema']}, GSIs {keys}; expected {expected}")
    print(f"registry table {table}: GSIs {sorted(keys)}")


def run(binary, workdir):
    processes = Processes(workdir)
    try:
        dynamo = processes.service("dynalite.sh", "DYNALITE_STATE_DIR", "dynalite")
        sqs = processes.service("fauxqs.sh", "FAUXQS_STATE_DIR", "fauxqs")
        hub_port_file = os.path.join(workdir, "hub.port")
        processes.start("hub", [binary, "hub", "--epoch", "1", "--port-file", hub_port_file])
        hub_url = f"ws://127.0.0.1:{wait_file(hub_port_file, 10)}/"
        # Twice: existing tables are kept. The registry's table comes along (seed 003's shape).
        for _ in range(2):
            created = subprocess.run([binary, "control", "create-tables", "--endpoint", dynamo, "--registry-table",
                                      "rooms"], check=True, timeout=60, capture_output=True, text=True).stdout
            if "rooms" not in created:
                fail(f"create-tables did not report the registry table: {created}")
            # dynalite has no UpdateTimeToLive: said, and not fatal.
            if "TTL on rooms.expiresAt not enabled: the endpoint has no UpdateTimeToLive" not in created:
                fail(f"create-tables did not report the registry table's TTL: {created}")
        describe_registry_table(dynamo, "rooms")
        subprocess.run([binary, "control", "start", "--endpoint", dynamo, "--connections", "c0", "--url", hub_url],
                       check=True, timeout=60, capture_output=True)
        queue_url = subprocess.run([binary, "control", "create-queue", "--sqs-endpoint", sqs, "--queue",
                                    "releases.fifo"], check=True, timeout=60, capture_output=True,
                                   text=True).stdout.strip()
        print(f"release queue: {queue_url}")
        flags = ["--endpoint", dynamo, "--lease", f"{LEASE_S}s", "--heartbeat", f"{HEARTBEAT_S}s", "--margin",
                 f"{MARGIN_S}s", "--reconcile", "60s", "--capacity", "1", "--sqs-endpoint", sqs, "--release-queue",
                 "releases.fifo"]

        a_port_file = os.path.join(workdir, "wa.port")
        a = processes.start("wa", [binary, "worker", "--worker-id", "wa", "--http", "127.0.0.1:0", "--port-file",
                                   a_port_file] + flags)
        wait_for(a, lambda e: e.get("event") == "lease.open" and e.get("connection") == "c0", 20, "lease.open c0")
        # A found c0 by its reconcile Query (read) and acquired it (a conditional write).
        a_values = metrics(int(wait_file(a_port_file, 5)))
        capacity = {kind: float(a_values.get(f'leaseproof_worker_dynamo_consumed_capacity_units_total{{kind="{kind}"}}',
                                             "0")) for kind in ("write", "read")}
        if capacity["write"] <= 0 or capacity["read"] <= 0:
            fail(f"wa's /metrics consumed capacity: {capacity}")
        print(f"wa /metrics consumed capacity after acquiring c0: {capacity}")
        b_port_file = os.path.join(workdir, "wb.port")
        b = processes.start("wb", [binary, "worker", "--worker-id", "wb", "--http", "127.0.0.1:0", "--port-file",
                                   b_port_file] + flags)
        wait_for(b, lambda e: e.get("event") == "release.queue", 10, "release.queue (the queue's URL)")
        # B's first reconcile (after up to 5 s of jitter) must have seen c0
        # held, so that its next one is 60 s away: only a notice (or, after
        # WATCH_EARLIEST_S, the watch) can make B acquire c0 in this test.
        b_status = int(wait_file(b_port_file, 5))
        deadline = time.monotonic() + 10
        while int(metrics(b_status).get('leaseproof_worker_calls_total{kind="reconcile"}', "0")) == 0:
            if time.monotonic() > deadline:
                fail("wb made no reconcile call within 10 s of its start")
            time.sleep(0.1)
        time.sleep(0.5)  # its answer
        if any(e.get("event") == "lease.open" for e in events(b)):
            fail("wb opened a lease before wa was stopped")

        terminated = time.monotonic()
        os.killpg(a.pid, signal.SIGTERM)
        try:
            a.wait(15)
        except subprocess.TimeoutExpired:
            fail("wa did not exit within 15 s of SIGTERM")
        drain_s = time.monotonic() - terminated
        if a.returncode != 0:
            fail(f"wa exited {a.returncode}: {tail(a)}")
        a_events = events(a)
        released = [e for e in a_events if e.get("event") == "lease.released" and e.get("connection") == "c0"]
        sent = [e for e in a_events if e.get("event") == "release.sent" and e.get("connection") == "c0"]
        if not released or not sent:
            fail(f"wa logged lease.released {len(released)}, release.sent {len(sent)}: {tail(a)}")

        opened = wait_for(b, lambda e: e.get("event") == "lease.open" and e.get("connection") == "c0",
                          WATCH_EARLIEST_S + 5, "lease.open c0")
        received = [e for e in events(b) if e.get("event") == "release.received" and e.get("connection") == "c0"]
        if not received or received[0].get("taken") is not True:
            fail(f"wb did not take a release notice for c0: {received}")
        if received[0]["mono_ms"] > opened["mono_ms"]:
            fail("wb opened c0 before it received the notice: the notice did not cause the acquire")
        if received[0].get("deduplication_id") != sent[0].get("deduplication_id"):
            fail(f"wb received {received[0].get('deduplication_id')}, wa sent {sent[0].get('deduplication_id')}")
        latency_s = (opened["mono_ms"] - released[0]["mono_ms"]) / 1000
        notice_s = (received[0]["mono_ms"] - released[0]["mono_ms"]) / 1000
        print(f"wa drained in {drain_s:.2f} s; release -> notice received {notice_s:.3f} s, -> wb lease.open "
              f"{latency_s:.3f} s (bound {NOTICE_BOUND_S} s; the watch would take >= {WATCH_EARLIEST_S} s)")
        if latency_s > NOTICE_BOUND_S:
            fail(f"release to wb's lease.open took {latency_s:.3f} s, over {NOTICE_BOUND_S} s")

        values = metrics(b_status)
        counted = {k: values.get(f"leaseproof_worker_release_notices_{k}_total") for k in ("received", "taken")}
        if counted != {"received": "1", "taken": "1"}:
            fail(f"wb's /metrics count notices {counted}")
        write = float(values.get('leaseproof_worker_dynamo_consumed_capacity_units_total{kind="write"}', "0"))
        if write <= 0:
            fail(f"wb's /metrics consumed write capacity {write} after its acquire")
        print(f"wb /metrics: notices received 1, taken 1; consumed write capacity {write}")

        # B drains too: it releases c0 and sends its own notice, nobody takes it.
        os.killpg(b.pid, signal.SIGTERM)
        try:
            b.wait(15)
        except subprocess.TimeoutExpired:
            fail("wb did not exit within 15 s of SIGTERM")
        if b.returncode != 0 or not any(e.get("event") == "release.sent" for e in events(b)):
            fail(f"wb exited {b.returncode} without release.sent: {tail(b)}")
        print("PASS release notice: a drained worker's connection opened by another through SQS")
    finally:
        processes.stop_all()


def main():
    return run_main("release-notice", "release_notice_e2e.py LEASEPROOF_BINARY", run)


if __name__ == "__main__":
    sys.exit(main())
