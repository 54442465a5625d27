#!/usr/bin/python3
"""Several publishers per channel on different shards of one threaded hub.

Starts `leaseproof hub --threads N` itself, opens PUBLISHERS keep-alive HTTP
connections one after another (the hub hands consecutive connections to its
shards in turn, so they land on different shards), and has them POST
/publish?channel=stress concurrently, each from its own thread. Meanwhile
SUBSCRIBERS WebSocket clients (python3-websockets) read the channel, answer
pings, and now and then hang up and resume after the last sequence number
they recorded; once in the run the hub closes every subscriber connected at
that instant with 1012 (/admin/close-all) and they resume too.

Checked, per run:
  - every publish is answered 200, and the answers' sequence numbers are
    1..PUBLISHERS*PUBLISHES, each once;
  - every subscriber records exactly that sequence, in order: a gap, a
    duplicate or a reorder fails the run naming the subscriber and the
    numbers; so does any reset (the ring holds every message);
  - the hub is still running at the end (it aborted on a publish order
    assertion before the shards' inboxes: issue 59).

  /usr/bin/python3 tests/real/hub_publish_stress.py [--threads 2,4] [--runs R] BINARY

Exit status 0 when every run passed, 1 otherwise, 2 on bad arguments. Every
wait is bounded; the hub is killed in a finally block (and by the kernel if
this script dies: PR_SET_PDEATHSIG), and its directory removed.
"""

import argparse
import asyncio
import ctypes
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import websockets

EPOCH = 7
CHANNEL = "stress"
PUBLISHERS = 4
PUBLISHES = 300  # per publisher
SUBSCRIBERS = 6
HANGUPS_PER_SUBSCRIBER = 3  # each at a random point of the stream
RUN_TIMEOUT_S = 60
HUB_START_TIMEOUT_S = 10
STEP_TIMEOUT_S = 5
DATA_HEADER_BYTES = 16  # a Data frame's share of the hub's queue besides its payload (core/resume/protocol.cpp)


class Failure(Exception):
    """An expectation of the run that did not hold; the message says which."""


def die_with_parent():
    """In the child: SIGKILL when this script dies, so a killed test leaves no hub behind."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Hub:
    def __init__(self, binary, threads, workdir):
        self.binary, self.threads, self.workdir = binary, threads, workdir
        self.process = None
        self.port = None
        self.log_path = os.path.join(workdir, "hub.log")

    def start(self):
        port_file = os.path.join(self.workdir, "hub.port")
        total = PUBLISHERS * PUBLISHES
        args = [self.binary, "hub", "--epoch", str(EPOCH), "--threads", str(self.threads), "--admin",
                "--ring-messages", str(total), "--replay-max", str(total), "--ping-interval", "200ms",
                "--port-file", port_file]
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            preexec_fn=die_with_parent)
        deadline = time.monotonic() + HUB_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise Failure(f"the hub exited with {self.process.returncode} before listening: {self.log_tail()!r}")
            try:
                with open(port_file) as f:
                    text = f.read().strip()
                if text:
                    self.port = int(text)
                    return
            except (FileNotFoundError, ValueError):
                pass
            time.sleep(0.02)
        raise Failure(f"no port in {port_file} within {HUB_START_TIMEOUT_S}s")

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            try:
                self.process.wait(STEP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass

    def log_tail(self, size=3000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-size:].decode(errors="replace")
        except OSError:
            return ""


class Publisher(threading.Thread):
    """One keep-alive HTTP connection, PUBLISHES POSTs in a row."""

    def __init__(self, index, port, start_together):
        super().__init__(name=f"publisher-{index}", daemon=True)
        self.index = index
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=STEP_TIMEOUT_S)
        self.connection.connect()  # now: consecutive accepts go to consecutive shards
        self.start_together = start_together
        self.seqs = []
        self.error = None

    def run(self):
        try:
            self.start_together.wait(STEP_TIMEOUT_S)
            for i in range(PUBLISHES):
                body = f"p{self.index}-{i}".encode()
                self.connection.request("POST", f"/publish?channel={CHANNEL}", body=body)
                response = self.connection.getresponse()
                text = response.read()
                if response.status != 200:
                    raise Failure(f"publish {i}: HTTP {response.status}: {text[:200]!r}")
                answer = json.loads(text)
                self.seqs.append(answer["first_seq"])
        except Exception as error:  # reported by the run, with the publisher's name
            self.error = f"{self.name}: {error!r}"
        finally:
            self.connection.close()


class Subscriber:
    """Records the channel's sequence numbers; hangs up and resumes at chosen points."""

    def __init__(self, index, port, total, rng):
        self.name = f"subscriber-{index}"
        self.port = port
        self.total = total
        self.hangups = sorted(rng.sample(range(1, total), HANGUPS_PER_SUBSCRIBER))
        self.recorded = []  # seqs, in the order recorded
        self.connections = 0
        self.closes_by_hub = 0
        self.problems = []

    async def run(self):
        while self.last() < self.total and not self.problems:
            await self.connect_once()

    def last(self):
        return self.recorded[-1] if self.recorded else 0

    async def connect_once(self):
        self.connections += 1
        url = f"ws://127.0.0.1:{self.port}/?worker={self.name}"
        async with websockets.connect(url, open_timeout=STEP_TIMEOUT_S, close_timeout=1, max_queue=None) as ws:
            await ws.send(json.dumps({"type": "subscribe", "channel": CHANNEL,
                                      "after": {"epoch": EPOCH, "seq": self.last()}}))
            consumed = 0
            try:
                while self.last() < self.total:
                    frame = json.loads(await ws.recv())
                    kind = frame.get("type")
                    if kind == "ping":
                        await ws.send(json.dumps({"type": "pong", "ping": frame["id"], "consumed": consumed}))
                        consumed = 0
                    elif kind == "data":
                        consumed += DATA_HEADER_BYTES + len(frame["payload"].encode())
                        self.record(frame)
                        if self.problems:
                            return
                        if self.hangups and self.last() >= self.hangups[0]:
                            self.hangups.pop(0)
                            return  # hang up; the next connection resumes after last()
                    else:
                        self.problems.append(f"unexpected frame after seq {self.last()}: {frame}")
                        return
            except websockets.ConnectionClosed as closed:
                if closed.rcvd is not None and closed.rcvd.code == 1012:
                    self.closes_by_hub += 1
                    return  # the close wave: resume
                raise

    def record(self, frame):
        seq = frame.get("seq")
        if frame.get("epoch") != EPOCH:
            self.problems.append(f"epoch {frame.get('epoch')} at seq {seq}, expected {EPOCH}")
        elif seq != self.last() + 1:
            what = "a duplicate" if seq <= self.last() else "a gap"
            self.problems.append(f"{what}: seq {seq} after {self.last()}")
        self.recorded.append(seq)


async def close_wave_when(hub_port, subscribers, at_least):
    """Once every subscriber has recorded `at_least`, POST /admin/close-all?code=1012; returns how many it closed."""
    while min(s.last() for s in subscribers) < at_least:
        if any(s.problems for s in subscribers):
            return None
        await asyncio.sleep(0.01)

    def post():
        connection = http.client.HTTPConnection("127.0.0.1", hub_port, timeout=STEP_TIMEOUT_S)
        try:
            connection.request("POST", "/admin/close-all?code=1012")
            response = connection.getresponse()
            body = response.read()
            if response.status != 200:
                raise Failure(f"close-all: HTTP {response.status}: {body!r}")
            return json.loads(body)["closed"]
        finally:
            connection.close()

    return await asyncio.get_running_loop().run_in_executor(None, post)


async def one_run(hub, seed):
    rng = random.Random(seed)
    total = PUBLISHERS * PUBLISHES
    start_together = threading.Event()
    publishers = [Publisher(i, hub.port, start_together) for i in range(PUBLISHERS)]
    subscribers = [Subscriber(i, hub.port, total, rng) for i in range(SUBSCRIBERS)]
    tasks = [asyncio.create_task(s.run()) for s in subscribers]
    for p in publishers:
        p.start()
    start_together.set()
    wave = asyncio.create_task(close_wave_when(hub.port, subscribers, total // 3))
    try:
        await asyncio.wait_for(asyncio.gather(*tasks, wave), RUN_TIMEOUT_S)
        closed_by_wave = wave.result()
    except asyncio.TimeoutError:
        raise Failure("not every subscriber recorded every message within "
                      f"{RUN_TIMEOUT_S}s: " + ", ".join(f"{s.name} at {s.last()}" for s in subscribers))
    except (OSError, websockets.WebSocketException) as error:
        exited = hub.process.poll()
        raise Failure(f"a subscriber's connection failed ({error!r})" +
                      (f"; the hub exited with {exited}" if exited is not None else ""))
    for p in publishers:
        p.join(STEP_TIMEOUT_S)
        if p.error:
            raise Failure(p.error)
    seqs = sorted(seq for p in publishers for seq in p.seqs)
    if seqs != list(range(1, total + 1)):
        duplicates = len(seqs) - len(set(seqs))
        raise Failure(f"the publish answers' numbers are not 1..{total} once each "
                      f"({len(seqs)} answers, {duplicates} duplicates)")
    for s in subscribers:
        if s.problems:
            raise Failure(f"{s.name}: {s.problems[0]}")
        if s.recorded != list(range(1, total + 1)):
            raise Failure(f"{s.name}: recorded {len(s.recorded)} numbers, not 1..{total} in order")
    if hub.process.poll() is not None:
        raise Failure(f"the hub exited with {hub.process.returncode}: {hub.log_tail()!r}")
    connections = sum(s.connections for s in subscribers)
    # The wave closes the subscribers connected at that instant (one between
    # its hang-up and its resume is not); a subscriber hanging up by choice,
    # or done, at that same instant sees its own close, not 1012. At least
    # one must have been closed by it and resumed.
    waves = sum(s.closes_by_hub for s in subscribers)
    if closed_by_wave is None or not 1 <= waves <= closed_by_wave:
        raise Failure(f"the close wave closed {closed_by_wave} subscribers; {waves} saw 1012")
    return (f"{total} messages from {PUBLISHERS} publishers, {SUBSCRIBERS} subscribers over {connections} "
            f"connections ({waves} closed by the wave, the rest hung up by choice), each recorded 1..{total} in order")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binary")
    parser.add_argument("--threads", default="2,4", help="comma-separated thread counts (default 2,4)")
    parser.add_argument("--runs", type=int, default=1, help="runs per thread count (default 1)")
    args = parser.parse_args()
    try:
        thread_counts = [int(t) for t in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads: '{args.threads}' is not a comma-separated list of numbers")
    if not all(1 <= t <= 64 for t in thread_counts):
        parser.error("--threads: each count must be in 1..64")
    if not 1 <= args.runs <= 100:
        parser.error("--runs: must be in 1..100")
    signal.signal(signal.SIGALRM, lambda *_: sys.exit("hub_publish_stress: watchdog: still running"))
    signal.alarm(len(thread_counts) * args.runs * (RUN_TIMEOUT_S + 30))
    failed = 0
    for threads in thread_counts:
        for run in range(1, args.runs + 1):
            workdir = tempfile.mkdtemp(prefix="leaseproof-hub-stress-")
            hub = Hub(args.binary, threads, workdir)
            name = f"--threads {threads} run {run}"
            try:
                hub.start()
                print(f"ok {name}: {asyncio.run(one_run(hub, seed=threads * 1000 + run))}", flush=True)
            except Failure as failure:
                failed += 1
                print(f"FAIL {name}: {failure}\nhub log tail:\n{hub.log_tail()}", flush=True)
            finally:
                hub.stop()
                shutil.rmtree(workdir, ignore_errors=True)
    print(f"hub_publish_stress: {failed} of {len(thread_counts) * args.runs} runs failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
