#!/usr/bin/python3
"""The hub's wire protocol driven by a WebSocket client this project did not write.

Debian's python3-websockets (10.4) talks to one `leaseproof hub` process this
script starts itself (runtime/hub/resume_wire.hpp gives the frames,
docs/resume-core.md "The hub" the reset rules). Each case prints
"ok <name>" or "FAIL <name>: why"; anything surprising that a case tolerates is
printed as "note <name>: ..." so it stays visible. Exit status: 0 when every
case passed, 1 otherwise, 2 on bad arguments.

  /usr/bin/python3 tests/real/hub_interop.py [--tls] build/release/cli/leaseproof

With --tls, the hub serves TLS only (--tls-cert/--tls-key from a throwaway CA
that tests/real/make_test_pki.sh makes), every case runs over wss:// and
https://, and one more case checks what a TLS hub does with clients that do
not speak TLS or do not trust it.

Run it with /usr/bin/python3: the websockets module is the distribution's.
The hub is killed in a finally block (and by the kernel if this script dies:
PR_SET_PDEATHSIG), and its temporary directory removed.
"""

import asyncio
import base64
import ctypes
import json
import os
import socket
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import websockets

EPOCH = 7
RING_MESSAGES = 20
PING_INTERVAL_S = 0.3
PONG_TIMEOUT_S = 2.0
CHANNEL = "c1"
SYNTHETIC_BYTES = 32  # the size of case reset_evicted's 30 synthetic messages
DATA_HEADER_BYTES = 16  # a Data frame's share of the hub's queue, besides its payload (core/resume/protocol.cpp)

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_TIMEOUT_S = 60  # every case together
WATCHDOG_S = 90  # SIGALRM if even the asyncio timeout fails to fire
CASE_TIMEOUT_S = 15
STEP_TIMEOUT_S = 5  # one frame, one HTTP request, one connect
QUIET_S = 0.3  # "nothing more" means nothing but pings within this long
HUB_START_TIMEOUT_S = 10
CLOSE_SLACK_S = 1.0
HUB_LOG_TAIL_BYTES = 4000
SUBSCRIBE_TIMEOUT_S = 1.0
QUEUE_BYTES = 1 << 20  # the hub's default --queue-bytes
CLIENT_FRAME_MAX = 4096  # the hub's largest frame from a subscriber (runtime/hub/hub_server.hpp)
FLOOD_PUBLISH_COUNT = 4
FLOOD_PUBLISH_BYTES = 64 * 1024
FLOOD_ROUNDS_MAX = 100  # publishes of 256 KiB each at most; the hub closes the client long before
OUTBOX_SLACK_BYTES = 64 * 1024  # JSON framing of the Data frames and control frames beside the queue bound


class Failure(Exception):
    """A case's expectation that did not hold; the message says which."""


class Closed(Exception):
    """The connection closed while a frame was awaited."""


def position(epoch, seq):
    return {"epoch": epoch, "seq": seq}


def describe_close(error):
    """What arrived, in websockets' terms: the close frame received (rcvd) and the one sent."""
    def frame(f):
        return "none" if f is None else f"{f.code} {f.reason!r}"
    return f"{type(error).__name__}: received close frame {frame(error.rcvd)}, sent close frame {frame(error.sent)}"


class Subscriber:
    """One WebSocket connection with a reader task: pings are counted (and answered
    unless answer_pings is False, with the bytes of Data read since the last pong),
    every other frame is queued for the case to inspect."""

    def __init__(self, name, ws, answer_pings):
        self.name = name
        self.ws = ws
        self.answer_pings = answer_pings
        self.frames = asyncio.Queue()
        self.pings = []  # ids, in arrival order
        self.pongs_sent = 0
        self.consumed_bytes = 0  # since the last pong
        self.problems = []  # frames that were not the protocol
        self.closed = None  # the ConnectionClosed, once closed
        self.closed_at = None
        self.opened_at = time.monotonic()
        self.task = asyncio.create_task(self._read())

    async def _read(self):
        try:
            while True:
                text = await self.ws.recv()
                if not isinstance(text, str):
                    self.problems.append(f"a binary frame: {text[:60]!r}")
                    continue
                try:
                    frame = json.loads(text)
                except ValueError:
                    self.problems.append(f"not JSON: {text[:60]!r}")
                    continue
                if frame.get("type") == "ping":
                    await self._on_ping(frame)
                    continue
                if frame.get("type") == "data":
                    self.consumed_bytes += DATA_HEADER_BYTES + len(frame.get("payload", "").encode())
                await self.frames.put(frame)
        except websockets.ConnectionClosed as error:
            self.closed = error
            self.closed_at = time.monotonic()
            await self.frames.put(None)

    async def _on_ping(self, frame):
        if not isinstance(frame.get("id"), int):
            self.problems.append(f"a ping without an integer id: {frame}")
            return
        if self.pings and frame["id"] <= self.pings[-1]:
            self.problems.append(f"ping ids not increasing: {self.pings[-1]} then {frame['id']}")
        self.pings.append(frame["id"])
        if self.answer_pings:
            pong = {"type": "pong", "ping": frame["id"], "consumed": self.consumed_bytes}
            self.consumed_bytes = 0
            await self.ws.send(json.dumps(pong))
            self.pongs_sent += 1

    async def next_frame(self, what, timeout_s=STEP_TIMEOUT_S):
        """The next frame that is not a ping; Failure if none within timeout_s."""
        try:
            frame = await asyncio.wait_for(self.frames.get(), timeout_s)
        except asyncio.TimeoutError:
            raise Failure(f"{self.name}: no frame within {timeout_s}s while waiting for {what}") from None
        if frame is None:
            await self.frames.put(None)  # stays closed for later calls
            raise Failure(f"{self.name}: closed while waiting for {what} ({describe_close(self.closed)})")
        return frame

    async def frames_within(self, duration_s):
        """Every frame but pings that arrives within duration_s."""
        deadline = time.monotonic() + duration_s
        frames = []
        while (left_s := deadline - time.monotonic()) > 0:
            try:
                frame = await asyncio.wait_for(self.frames.get(), left_s)
            except asyncio.TimeoutError:
                break
            if frame is None:
                await self.frames.put(None)
                raise Failure(f"{self.name}: closed while it should stay open ({describe_close(self.closed)})")
            frames.append(frame)
        return frames

    async def wait_closed(self, timeout_s):
        try:
            await asyncio.wait_for(asyncio.shield(self.task), timeout_s)
        except asyncio.TimeoutError:
            raise Failure(f"{self.name}: still open after {timeout_s:.1f}s") from None
        return self.closed

    def check_no_problems(self):
        if self.problems:
            raise Failure(f"{self.name}: frames that are not the protocol: {'; '.join(self.problems)}")

    async def close(self):
        try:
            await asyncio.wait_for(self.ws.close(), STEP_TIMEOUT_S)
        except (asyncio.TimeoutError, OSError):
            pass
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass


class RawClient:
    """A WebSocket client on a bare socket (RFC 6455 framing written out here):
    it sends frames a library would refuse to send (text that is not UTF-8,
    pongs that lie) and reads only when a case asks it to, so it can stop
    reading altogether. Blocking calls, each bounded by STEP_TIMEOUT_S."""

    def __init__(self, hub, receive_buffer=None):
        port = hub.port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:  # before connect, so the window stays small
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(STEP_TIMEOUT_S)
        self.sock.connect(("127.0.0.1", port))
        if hub.tls is not None:
            self.sock = hub.tls.wrap_socket(self.sock, server_hostname="127.0.0.1")
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise Failure("the hub closed the connection during the upgrade")
            self.buffer += chunk
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise Failure(f"upgrade refused: {head[:200]!r}")

    def send_frame(self, payload, opcode=0x1):
        """One final frame, masked as a client's must be."""
        n = len(payload)
        if n < 126:
            header = bytes([0x80 | opcode, 0x80 | n])
        elif n < 1 << 16:
            header = bytes([0x80 | opcode, 0x80 | 126]) + n.to_bytes(2, "big")
        else:
            header = bytes([0x80 | opcode, 0x80 | 127]) + n.to_bytes(8, "big")
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def send_json(self, frame):
        self.send_frame(json.dumps(frame).encode())

    def _read_exactly(self, n, deadline):
        while len(self.buffer) < n:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def read_close(self, timeout_s):
        """Reads frames until the hub's close frame: (code, reason), or (None, why)
        when the connection ended without one. Failure if neither within timeout_s."""
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                head = self._read_exactly(2, deadline)
                if head is None:
                    return None, "closed without a close frame"
                length = head[1] & 0x7F
                if length >= 126:
                    extended = self._read_exactly(2 if length == 126 else 8, deadline)
                    if extended is None:
                        return None, "closed within a frame"
                    length = int.from_bytes(extended, "big")
                payload = self._read_exactly(length, deadline)
                if payload is None:
                    return None, "closed within a frame"
                if head[0] & 0x0F == 0x8:
                    code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else None
                    return code, payload[2:].decode(errors="replace")
        except socket.timeout:
            raise Failure(f"no close from the hub within {timeout_s}s") from None
        except ConnectionResetError:
            return None, "connection reset"

    def close(self):
        self.sock.close()


class Hub:
    """The hub process and the HTTP/WebSocket helpers around it."""

    def __init__(self, binary, workdir, tls):
        self.binary = binary
        self.workdir = workdir
        # With --tls: the client context trusting the test CA, and the hub's certificate files.
        self.tls = None
        self.tls_files = []
        self.scheme = "http", "ws"
        if tls:
            pki = os.path.join(workdir, "pki")
            subprocess.run([os.path.join(HERE, "make_test_pki.sh"), pki], check=True, capture_output=True,
                           timeout=120)
            self.tls = ssl.create_default_context(cafile=os.path.join(pki, "ca.pem"))
            self.tls_files = ["--tls-cert", os.path.join(pki, "good.pem"), "--tls-key", os.path.join(pki, "good.key")]
            self.scheme = "https", "wss"
        self.process = None
        self.port = None
        self.log_path = os.path.join(workdir, "hub.log")
        self.subscribers = []  # opened in the current case
        self.top = 0  # of CHANNEL, from the publish answers

    def start(self):
        port_file = os.path.join(self.workdir, "hub.port")
        args = [self.binary, "hub", "--epoch", str(EPOCH), "--ring-messages", str(RING_MESSAGES),
                # The default --replay-max (5000) must not exceed the ring: the hub refuses to start.
                "--replay-max", str(RING_MESSAGES),
                "--ping-interval", f"{int(PING_INTERVAL_S * 1000)}ms",
                "--pong-timeout", f"{int(PONG_TIMEOUT_S * 1000)}ms",
                "--subscribe-timeout", f"{int(SUBSCRIBE_TIMEOUT_S * 1000)}ms", "--port-file", port_file,
                # Three shards on any machine: consecutive connections land on
                # different threads, and every case must hold across them.
                "--threads", "3"] + self.tls_files
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            preexec_fn=die_with_parent)
        deadline = time.monotonic() + HUB_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise Failure(f"the hub exited with {self.process.returncode} before listening; "
                              f"log: {self.log_tail()!r}")
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

    def log_tail(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-HUB_LOG_TAIL_BYTES:].decode(errors="replace")
        except OSError:
            return ""

    async def http(self, method, target, body=None):
        def call():
            request = urllib.request.Request(f"{self.scheme[0]}://127.0.0.1:{self.port}{target}", data=body,
                                             method=method)
            try:
                with urllib.request.urlopen(request, timeout=STEP_TIMEOUT_S, context=self.tls) as response:
                    return response.status, response.read().decode()
            except urllib.error.HTTPError as error:
                return error.code, error.read().decode(errors="replace")
        return await asyncio.to_thread(call)

    async def publish(self, body=None, count=None, size=None):
        target = f"/publish?channel={CHANNEL}"
        if count is not None:
            target += f"&count={count}&size={size}"
        status, text = await self.http("POST", target, body.encode() if body is not None else b"")
        if status != 200:
            raise Failure(f"POST {target}: HTTP {status}: {text}")
        answer = json.loads(text)
        expected_count = 1 if count is None else count
        want = {"channel": CHANNEL, "epoch": EPOCH, "first_seq": self.top + 1, "last_seq": self.top + expected_count}
        if answer != want:
            raise Failure(f"POST {target} answered {answer}, expected {want}")
        self.top = answer["last_seq"]
        return answer

    async def metric(self, line_prefix):
        """The value of the sample whose name and labels are line_prefix; 0 when absent."""
        status, text = await self.http("GET", "/metrics")
        if status != 200:
            raise Failure(f"GET /metrics: HTTP {status}")
        for line in text.splitlines():
            if line.startswith(line_prefix + " "):
                return int(float(line.split()[-1]))
        return 0

    async def connect(self, name, answer_pings=True):
        ws = await websockets.connect(f"{self.scheme[1]}://127.0.0.1:{self.port}/", ping_interval=None,
                                      open_timeout=STEP_TIMEOUT_S, close_timeout=1, ssl=self.tls)
        subscriber = Subscriber(name, ws, answer_pings)
        self.subscribers.append(subscriber)
        return subscriber

    async def subscribe(self, name, after=None, channel=CHANNEL, answer_pings=True):
        subscriber = await self.connect(name, answer_pings)
        frame = {"type": "subscribe", "channel": channel}
        if after is not None:
            frame["after"] = after
        await subscriber.ws.send(json.dumps(frame))
        return subscriber

    async def close_subscribers(self):
        for subscriber in self.subscribers:
            await subscriber.close()
        self.subscribers = []


def die_with_parent():
    """In the child: SIGKILL when this script dies, so a killed test leaves no hub behind."""
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def expect_data(frame, seq, payload=None, channel=CHANNEL, size=None):
    want = {"type": "data", "channel": channel, "epoch": EPOCH, "seq": seq}
    got = {k: frame.get(k) for k in want}
    if got != want:
        raise Failure(f"expected data {want}, got {frame}")
    if payload is not None and frame.get("payload") != payload:
        raise Failure(f"seq {seq}: expected payload {payload!r}, got {frame.get('payload')!r}")
    if not isinstance(frame.get("payload"), str):
        raise Failure(f"seq {seq}: payload is not a string: {frame}")
    if size is not None and len(frame["payload"].encode()) != size:
        raise Failure(f"seq {seq}: expected a {size}-byte payload, got {len(frame['payload'].encode())} bytes: {frame}")


def expect_reset(frame, kind, after, resume):
    want = {"type": "reset", "kind": kind, "after": after, "resume": resume}
    if frame != want:
        raise Failure(f"expected {json.dumps(want)}, got {json.dumps(frame)}")


async def expect_quiet(subscriber, why):
    extra = await subscriber.frames_within(QUIET_S)
    if extra:
        raise Failure(f"{subscriber.name}: expected nothing but pings within {QUIET_S}s {why}, got {extra}")


# ---- cases --------------------------------------------------------------------

async def case_live_from_start(hub, notes):
    """Subscribe without "after", then five POSTs arrive live as seq 1..5."""
    subscriber = await hub.subscribe("from-start")
    payloads = [f"m{i}" for i in range(1, 6)]
    for body in payloads:
        await hub.publish(body)
    first = await subscriber.next_frame("seq 1")
    if first.get("type") == "reset":
        # docs/resume-core.md: an epoch-0 position while the hub is past its first
        # epoch resets epoch_changed; it resumes after seq 0, so nothing is lost.
        expect_reset(first, "epoch_changed", position(0, 0), position(EPOCH, 0))
        notes.append(f"a subscribe without \"after\" on a fresh hub at epoch {EPOCH} first gets {json.dumps(first)} "
                     f"(nothing lost: it resumes after seq 0)")
        first = await subscriber.next_frame("seq 1")
    expect_data(first, 1, payloads[0])
    for seq, payload in enumerate(payloads[1:], start=2):
        expect_data(await subscriber.next_frame(f"seq {seq}"), seq, payload)
    await expect_quiet(subscriber, "after seq 5")
    subscriber.check_no_problems()


async def case_resume_after_seq3(hub, notes):
    """Resume after {7,3}: exactly seq 4 and 5, no reset."""
    subscriber = await hub.subscribe("resume-after-3", after=position(EPOCH, 3))
    for seq in (4, 5):
        expect_data(await subscriber.next_frame(f"seq {seq}"), seq, f"m{seq}")
    await expect_quiet(subscriber, "after seq 5")
    subscriber.check_no_problems()


async def case_reset_evicted(hub, notes):
    """30 more messages through a 20-message ring; resume after {7,2} resets evicted."""
    answer = await hub.publish(count=30, size=SYNTHETIC_BYTES)
    top = answer["last_seq"]
    oldest = top - (RING_MESSAGES - 1)
    evictions = await hub.metric("leaseproof_hub_ring_evictions_total")
    if evictions != oldest - 1:
        raise Failure(f"leaseproof_hub_ring_evictions_total is {evictions}, expected {oldest - 1} (top {top})")
    subscriber = await hub.subscribe("evicted", after=position(EPOCH, 2))
    expect_reset(await subscriber.next_frame("the evicted reset"), "evicted", position(EPOCH, 2),
                 position(EPOCH, oldest - 1))
    for seq in range(oldest, top + 1):
        expect_data(await subscriber.next_frame(f"seq {seq}"), seq, size=SYNTHETIC_BYTES)
    await expect_quiet(subscriber, f"after the top (seq {top})")
    subscriber.check_no_problems()


async def case_reset_epoch_changed(hub, notes):
    """A position in another epoch resets epoch_changed, resuming after oldest-1 of this one."""
    oldest = hub.top - (RING_MESSAGES - 1)
    subscriber = await hub.subscribe("epoch-changed", after=position(3, 10))
    expect_reset(await subscriber.next_frame("the epoch_changed reset"), "epoch_changed", position(3, 10),
                 position(EPOCH, oldest - 1))
    for seq in range(oldest, hub.top + 1):
        expect_data(await subscriber.next_frame(f"seq {seq}"), seq, size=SYNTHETIC_BYTES)
    await expect_quiet(subscriber, f"after the top (seq {hub.top})")
    subscriber.check_no_problems()


async def case_reset_ahead_of_top(hub, notes):
    """A position beyond the top resets ahead_of_top, resuming after the top, with nothing to send."""
    subscriber = await hub.subscribe("ahead-of-top", after=position(EPOCH, 10_000))
    expect_reset(await subscriber.next_frame("the ahead_of_top reset"), "ahead_of_top", position(EPOCH, 10_000),
                 position(EPOCH, hub.top))
    await expect_quiet(subscriber, "after the reset")
    subscriber.check_no_problems()


async def case_ping_pong(hub, notes):
    """A client that answers pings stays; one that does not is cut (1006) within
    ping_interval + pong_timeout, and /metrics counts that close."""
    closes_before = await hub.metric('leaseproof_hub_closes_total{code="1006"}')
    answering = await hub.subscribe("answering", after=position(EPOCH, hub.top))
    silent = await hub.subscribe("silent", after=position(EPOCH, hub.top), answer_pings=False)
    subscribed_at = time.monotonic()
    # Data while they run, so the pongs report consumed bytes (the silent one's
    # queue fills a little too).
    await hub.publish("during-pings")
    expect_data(await answering.next_frame("the live message"), hub.top, "during-pings")
    cut_by_s = PING_INTERVAL_S + PONG_TIMEOUT_S + CLOSE_SLACK_S
    error = await silent.wait_closed(cut_by_s + 0.5)
    after_s = silent.closed_at - subscribed_at
    if after_s > cut_by_s:
        raise Failure(f"the silent client was closed after {after_s:.2f}s, later than {cut_by_s:.1f}s")
    if after_s < PONG_TIMEOUT_S - 0.1:
        raise Failure(f"the silent client was closed after {after_s:.2f}s, before the pong timeout ({PONG_TIMEOUT_S}s)")
    # 1006 means "no close frame" (RFC 6455 7.4.1: never sent in one). What
    # websockets reports depends on what the hub does: dropping the connection
    # gives rcvd None and sent None; a close frame carrying 1006 is refused by
    # the library (rcvd None, sent 1002); a library that accepted it would show
    # rcvd 1006. Any other code received is wrong.
    if error.rcvd is not None and error.rcvd.code != 1006:
        raise Failure(f"the silent client was closed with {error.rcvd.code}, expected 1006 ({describe_close(error)})")
    if error.rcvd is None and error.sent is None:
        how = "the hub dropped the connection without a close frame (RFC 6455's 1006)"
    elif error.rcvd is None:
        how = (f"websockets refused the hub's close frame and failed the connection itself with {error.sent.code} "
               f"({error.sent.reason!r}); a close frame carrying 1006 breaks RFC 6455 7.4.1")
    else:
        how = "a close frame with code 1006 arrived and websockets accepted it (RFC 6455 7.4.1 forbids sending it)"
    notes.append(f"silent client closed after {after_s:.2f}s; {describe_close(error)}: {how}")
    closes_after = await hub.metric('leaseproof_hub_closes_total{code="1006"}')
    if closes_after != closes_before + 1:
        raise Failure(f'leaseproof_hub_closes_total{{code="1006"}} went {closes_before} -> {closes_after}, expected +1')
    # The answering client has now lived through several ping intervals.
    await answering.frames_within(max(0.0, 1.5 - (time.monotonic() - answering.opened_at)))
    lived_s = time.monotonic() - answering.opened_at
    if answering.closed is not None:
        raise Failure(f"the answering client was closed ({describe_close(answering.closed)})")
    if lived_s < 1.5:
        raise Failure(f"the answering client was only checked after {lived_s:.2f}s")
    min_pings = int(lived_s / PING_INTERVAL_S) - 1
    if len(answering.pings) < min_pings or answering.pongs_sent != len(answering.pings):
        raise Failure(f"the answering client saw {len(answering.pings)} pings and sent {answering.pongs_sent} pongs "
                      f"in {lived_s:.2f}s, expected at least {min_pings} of each")
    if len(silent.pings) < int(PONG_TIMEOUT_S / PING_INTERVAL_S) - 1:
        raise Failure(f"the silent client saw only {len(silent.pings)} pings before its close")
    answering.check_no_problems()
    silent.check_no_problems()


async def case_malformed_frame(hub, notes):
    """A text frame that is not JSON closes the connection with 1002, as the first
    frame and after a subscribe alike."""
    errors_before = await hub.metric("leaseproof_hub_protocol_errors_total")
    closes_before = await hub.metric('leaseproof_hub_closes_total{code="1002"}')
    first = await hub.connect("malformed-first")
    later = await hub.subscribe("malformed-after-subscribe", after=position(EPOCH, hub.top))
    await first.ws.send("not json")
    await later.ws.send("not json")
    for subscriber in (first, later):
        error = await subscriber.wait_closed(STEP_TIMEOUT_S)
        if error.rcvd is None or error.rcvd.code != 1002:
            raise Failure(f"{subscriber.name}: expected a close frame with 1002, got {describe_close(error)}")
    notes.append(f"close frame: {first.closed.rcvd.code} {first.closed.rcvd.reason!r}")
    errors_after = await hub.metric("leaseproof_hub_protocol_errors_total")
    closes_after = await hub.metric('leaseproof_hub_closes_total{code="1002"}')
    if errors_after != errors_before + 2 or closes_after != closes_before + 2:
        raise Failure(f"protocol errors {errors_before} -> {errors_after}, 1002 closes {closes_before} -> "
                      f"{closes_after}; expected +2 each")


async def case_binary_frame(hub, notes):
    """A binary frame (even one holding a valid subscribe) closes with 1003:
    the protocol is JSON text frames."""
    closes_before = await hub.metric('leaseproof_hub_closes_total{code="1003"}')
    subscriber = await hub.connect("binary")
    await subscriber.ws.send(json.dumps({"type": "subscribe", "channel": "c1"}).encode())
    error = await subscriber.wait_closed(STEP_TIMEOUT_S)
    if error.rcvd is None or error.rcvd.code != 1003:
        raise Failure(f"expected a close frame with 1003, got {describe_close(error)}")
    closes_after = await hub.metric('leaseproof_hub_closes_total{code="1003"}')
    if closes_after != closes_before + 1:
        raise Failure(f"1003 closes {closes_before} -> {closes_after}; expected +1")


async def case_lying_pongs(hub, notes):
    """A client that stops reading and claims in its pongs to have consumed
    everything (10^12 bytes) cannot grow the hub's outbox past the queue bound:
    the hub credits a pong only with what it wrote to the socket, so the
    client's queue fills and it is closed with 1013."""
    closes_before = await hub.metric('leaseproof_hub_closes_total{code="1013"}')
    clamped_before = await hub.metric("leaseproof_hub_pong_credit_clamped_total")
    liar = RawClient(hub, receive_buffer=4096)
    try:
        liar.send_json({"type": "subscribe", "channel": "flood"})
        largest_outbox = 0
        rounds = 0
        for rounds in range(1, FLOOD_ROUNDS_MAX + 1):
            status, text = await hub.http(
                "POST", f"/publish?channel=flood&count={FLOOD_PUBLISH_COUNT}&size={FLOOD_PUBLISH_BYTES}", b"")
            if status != 200:
                raise Failure(f"publish to flood: HTTP {status}: {text}")
            largest_outbox = max(largest_outbox, await hub.metric("leaseproof_hub_outbox_bytes"))
            try:
                liar.send_json({"type": "pong", "ping": 0, "consumed": 10 ** 12})
            except OSError as error:  # the hub dropped it (its pings went unanswered): judged below
                notes.append(f"the hub dropped the connection: {error}")
                break
            await asyncio.sleep(0.02)  # the hub reads the pong
            if await hub.metric('leaseproof_hub_closes_total{code="1013"}') > closes_before:
                break
        closes_after = await hub.metric('leaseproof_hub_closes_total{code="1013"}')
        clamped_after = await hub.metric("leaseproof_hub_pong_credit_clamped_total")
    finally:
        liar.close()
    published_mib = rounds * FLOOD_PUBLISH_COUNT * FLOOD_PUBLISH_BYTES / (1 << 20)
    notes.append(f"{published_mib:.0f} MiB published; largest outbox {largest_outbox} B; pongs clamped "
                 f"{clamped_after - clamped_before}")
    if largest_outbox > QUEUE_BYTES + OUTBOX_SLACK_BYTES:
        raise Failure(f"the outbox grew to {largest_outbox} B, above the queue bound {QUEUE_BYTES} B + "
                      f"{OUTBOX_SLACK_BYTES} B")
    if closes_after != closes_before + 1:
        raise Failure(f"1013 closes {closes_before} -> {closes_after} after {published_mib:.0f} MiB; expected +1")
    if clamped_after <= clamped_before:
        raise Failure("no pong was clamped: the lie never reached the hub")


async def case_pong_for_unsent_ping(hub, notes):
    """A pong naming a ping the hub never sent closes with 1002 (a client could
    otherwise keep itself alive with guessed ids)."""
    errors_before = await hub.metric("leaseproof_hub_protocol_errors_total")
    client = RawClient(hub)
    try:
        client.send_json({"type": "subscribe", "channel": CHANNEL, "after": position(EPOCH, hub.top)})
        client.send_json({"type": "pong", "ping": 10 ** 9, "consumed": 0})
        code, reason = client.read_close(STEP_TIMEOUT_S)
    finally:
        client.close()
    if code != 1002:
        raise Failure(f"expected a close frame with 1002, got {code} {reason!r}")
    notes.append(f"close frame: {code} {reason!r}")
    errors_after = await hub.metric("leaseproof_hub_protocol_errors_total")
    if errors_after != errors_before + 1:
        raise Failure(f"protocol errors {errors_before} -> {errors_after}; expected +1")


async def case_no_subscribe(hub, notes):
    """A WebSocket that never subscribes is closed with 1008 after --subscribe-timeout."""
    timeouts_before = await hub.metric("leaseproof_hub_subscribe_timeouts_total")
    client = RawClient(hub)
    opened = time.monotonic()
    try:
        code, reason = client.read_close(SUBSCRIBE_TIMEOUT_S + CLOSE_SLACK_S)
    finally:
        client.close()
    after_s = time.monotonic() - opened
    if code != 1008:
        raise Failure(f"expected a close frame with 1008, got {code} {reason!r}")
    if after_s < SUBSCRIBE_TIMEOUT_S - 0.1:
        raise Failure(f"closed after {after_s:.2f}s, before --subscribe-timeout ({SUBSCRIBE_TIMEOUT_S}s)")
    notes.append(f"closed after {after_s:.2f}s: {code} {reason!r}")
    timeouts_after = await hub.metric("leaseproof_hub_subscribe_timeouts_total")
    if timeouts_after != timeouts_before + 1:
        raise Failure(f"subscribe timeouts {timeouts_before} -> {timeouts_after}; expected +1")


async def case_tls_refuses_what_is_not_tls(hub, notes):
    """With --tls-cert (run with --tls): a plain ws:// client, a TLS client that
    does not trust the hub's CA, and a TCP client that never starts its
    handshake are each dropped, counted, and hold no connection slot: the
    silent one goes within --subscribe-timeout, which bounds the handshake."""
    failures_before = await hub.metric("leaseproof_hub_tls_handshake_failures_total")
    try:
        ws = await websockets.connect(f"ws://127.0.0.1:{hub.port}/", ping_interval=None,
                                      open_timeout=STEP_TIMEOUT_S, close_timeout=1)
        await ws.close()
        raise Failure("a plain ws:// client opened a WebSocket on a TLS hub")
    except (websockets.exceptions.InvalidMessage, websockets.exceptions.InvalidHandshake, OSError, EOFError) as error:
        notes.append(f"plain ws:// client: {type(error).__name__}")
    try:
        ws = await websockets.connect(f"wss://127.0.0.1:{hub.port}/", ping_interval=None,
                                      open_timeout=STEP_TIMEOUT_S, close_timeout=1, ssl=ssl.create_default_context())
        await ws.close()
        raise Failure("a client trusting only the system's store accepted the test CA's certificate")
    except ssl.SSLCertVerificationError as error:
        notes.append(f"client without the test CA: {error.verify_message}")
    silent = socket.create_connection(("127.0.0.1", hub.port), timeout=STEP_TIMEOUT_S)
    opened = time.monotonic()
    try:
        silent.settimeout(SUBSCRIBE_TIMEOUT_S + CLOSE_SLACK_S)
        try:
            dropped = silent.recv(1) == b""
        except ConnectionResetError:
            dropped = True
        except socket.timeout:
            dropped = False
    finally:
        silent.close()
    if not dropped:
        raise Failure(f"a client that never started TLS was still connected after {SUBSCRIBE_TIMEOUT_S + CLOSE_SLACK_S}s")
    notes.append(f"silent TCP client dropped after {time.monotonic() - opened:.2f}s")
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while True:
        failures_after = await hub.metric("leaseproof_hub_tls_handshake_failures_total")
        if failures_after >= failures_before + 3 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    if failures_after != failures_before + 3:
        raise Failure(f"TLS handshake failures {failures_before} -> {failures_after}; expected +3")


async def closed_by_library(hub, frame, want_code):
    errors_before = await hub.metric("leaseproof_hub_protocol_errors_total")
    closes_before = await hub.metric(f'leaseproof_hub_closes_total{{code="{want_code}"}}')
    client = RawClient(hub)
    try:
        client.send_frame(frame)
        code, reason = client.read_close(STEP_TIMEOUT_S)
    finally:
        client.close()
    if code != want_code:
        raise Failure(f"expected a close frame with {want_code}, got {code} {reason!r}")
    await asyncio.sleep(0.05)  # the hub counts it once its read fails; the close frame went first
    errors_after = await hub.metric("leaseproof_hub_protocol_errors_total")
    closes_after = await hub.metric(f'leaseproof_hub_closes_total{{code="{want_code}"}}')
    if errors_after != errors_before + 1 or closes_after != closes_before + 1:
        raise Failure(f"protocol errors {errors_before} -> {errors_after}, {want_code} closes {closes_before} -> "
                      f"{closes_after}; expected +1 each")


async def case_invalid_utf8(hub, notes):
    """A text frame that is not UTF-8 closes with 1007, counted as a protocol error."""
    await closed_by_library(hub, b'{"type":"subscribe","channel":"\xff"}', 1007)


async def case_frame_too_big(hub, notes):
    """A frame larger than the hub reads from a subscriber closes with 1009, counted as a protocol error."""
    await closed_by_library(hub, b" " * (CLIENT_FRAME_MAX + 1), 1009)


async def case_shutdown_closes_unsubscribed(hub, notes):
    """SIGTERM closes a connection that never subscribed with 1001 at once, and
    the hub exits without waiting for it. Last: it stops the hub."""
    client = RawClient(hub)
    try:
        signalled = time.monotonic()
        hub.process.send_signal(signal.SIGTERM)
        code, reason = client.read_close(CLOSE_SLACK_S)
    finally:
        client.close()
    if code != 1001:
        raise Failure(f"expected a close frame with 1001, got {code} {reason!r}")
    try:
        await asyncio.to_thread(hub.process.wait, 2 * CLOSE_SLACK_S)
    except subprocess.TimeoutExpired:
        raise Failure(f"the hub still runs {2 * CLOSE_SLACK_S}s after SIGTERM") from None
    exited_s = time.monotonic() - signalled
    if hub.process.returncode != 0:
        raise Failure(f"the hub exited with {hub.process.returncode} after SIGTERM")
    notes.append(f"closed {code} {reason!r}; the hub exited 0 after {exited_s:.2f}s")


CASES = [
    ("live_from_start", case_live_from_start),
    ("resume_after_seq_3", case_resume_after_seq3),
    ("reset_evicted", case_reset_evicted),
    ("reset_epoch_changed", case_reset_epoch_changed),
    ("reset_ahead_of_top", case_reset_ahead_of_top),
    ("ping_pong_liveness", case_ping_pong),
    ("malformed_frame_closes_1002", case_malformed_frame),
    ("binary_frame_closes_1003", case_binary_frame),
    ("lying_pongs_cannot_grow_the_outbox", case_lying_pongs),
    ("pong_for_a_ping_never_sent_closes_1002", case_pong_for_unsent_ping),
    ("no_subscribe_closes_1008", case_no_subscribe),
    ("invalid_utf8_closes_1007", case_invalid_utf8),
    ("frame_too_big_closes_1009", case_frame_too_big),
]
LAST_CASE = ("shutdown_closes_unsubscribed_1001", case_shutdown_closes_unsubscribed)


async def run_case(hub, name, case):
    """Runs one case and prints its result; returns 1 if it failed."""
    failed = 0
    notes = []
    try:
        await asyncio.wait_for(case(hub, notes), CASE_TIMEOUT_S)
        print(f"ok {name}", flush=True)
    except Failure as error:
        failed += 1
        print(f"FAIL {name}: {error}", flush=True)
    except asyncio.TimeoutError:
        failed += 1
        print(f"FAIL {name}: did not finish within {CASE_TIMEOUT_S}s", flush=True)
    except Exception as error:  # a case's own crash is a failure too, with its cause
        failed += 1
        print(f"FAIL {name}: {type(error).__name__}: {error}", flush=True)
    for note in notes:
        print(f"note {name}: {note}", flush=True)
    await hub.close_subscribers()
    return failed


TLS_CASES = [("tls_refuses_what_is_not_tls", case_tls_refuses_what_is_not_tls)]


async def run_cases(hub):
    failed = 0
    for name, case in CASES + (TLS_CASES if hub.tls is not None else []):
        failed += await run_case(hub, name, case)
    if hub.process.poll() is not None:
        failed += 1
        print(f"FAIL hub_survived: the hub exited with {hub.process.returncode}", flush=True)
    else:
        print("ok hub_survived", flush=True)
    failed += await run_case(hub, *LAST_CASE)
    return failed


class Interrupted(BaseException):
    """SIGALRM (the watchdog) or SIGTERM: a BaseException, so that no case's
    `except Exception` swallows it and the finally block still stops the hub."""


def on_signal(signum, frame):
    if signum == signal.SIGALRM:
        raise Interrupted(f"the whole run took longer than {WATCHDOG_S}s (watchdog)")
    raise Interrupted(f"signal {signal.Signals(signum).name}")


def main(argv):
    tls = "--tls" in argv[1:]
    args = [a for a in argv[1:] if a != "--tls"]
    if len(args) != 1:
        print(f"usage: {argv[0]} [--tls] PATH/TO/leaseproof", file=sys.stderr)
        return 2
    binary = os.path.abspath(args[0])
    workdir = tempfile.mkdtemp(prefix="hub_interop.")
    try:
        hub = Hub(binary, workdir, tls)
    except (subprocess.SubprocessError, OSError, ssl.SSLError) as error:
        print(f"FAIL tls_setup: the test certificates: {error}", flush=True)
        shutil.rmtree(workdir, ignore_errors=True)
        return 1
    signal.signal(signal.SIGALRM, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.alarm(WATCHDOG_S)
    failed = 1
    try:
        hub.start()
        print(f"hub: pid {hub.process.pid}, port {hub.port}, {'TLS' if tls else 'plain'}, "
              f"websockets {websockets.__version__}", flush=True)
        failed = asyncio.run(asyncio.wait_for(run_cases(hub), RUN_TIMEOUT_S))
    except Failure as error:
        print(f"FAIL hub_start: {error}", flush=True)
    except asyncio.TimeoutError:
        print(f"FAIL run: the cases took longer than {RUN_TIMEOUT_S}s", flush=True)
    except Interrupted as error:
        print(f"FAIL run: {error}", flush=True)
    finally:
        signal.alarm(0)
        hub.stop()
        if failed:
            print(f"hub log (tail):\n{hub.log_tail()}", flush=True)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
