#!/usr/bin/python3
"""A release queue whose server answers ReceiveMessage at once and empty,
though the worker asked it to wait (long polling): the worker must not ask
again at once. It asked about 3,000 times a second; now it waits its poll
interval (500 ms) after an answer that came before half its wait.

A stub SQS on 127.0.0.1 (this file, a thread) answers GetQueueUrl and
ReceiveMessage and counts them; a worker with --release-queue runs against
it and a dynalite of its own for RUN_S seconds.

Usage: release_poll_test.py LEASEPROOF_BINARY
Ends every process it started, also on failure. About 6 s.
"""
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
RUN_S = 4.0
# 500 ms between receives, plus the first: at most about 9 in 4 s.
RECEIVES_MAX = 12


class Stub(http.server.BaseHTTPRequestHandler):
    counts = {}
    lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        operation = self.headers.get("X-Amz-Target", "").rsplit(".", 1)[-1]
        with Stub.lock:
            Stub.counts[operation] = Stub.counts.get(operation, 0) + 1
        if operation == "GetQueueUrl":
            name = json.loads(body or b"{}").get("QueueName", "q")
            answer = {"QueueUrl": f"http://127.0.0.1:{self.server.server_port}/000000000000/{name}"}
        else:
            answer = {}  # ReceiveMessage: nothing, at once
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.0")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def main():
    if len(sys.argv) != 2 or not os.access(sys.argv[1], os.X_OK):
        print("usage: release_poll_test.py LEASEPROOF_BINARY", file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    workdir = tempfile.mkdtemp(prefix="leaseproof-release-poll-")
    env = dict(os.environ, DYNALITE_STATE_DIR=os.path.join(workdir, "dynalite"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    worker = None
    try:
        dynamo = subprocess.run([os.path.join(REPO, "scripts", "dynalite.sh"), "start"], env=env, check=True,
                                capture_output=True, text=True, timeout=60).stdout.strip()
        subprocess.run([binary, "control", "create-tables", "--endpoint", dynamo], check=True, capture_output=True,
                       timeout=60)
        log = open(os.path.join(workdir, "worker.log"), "w")
        worker = subprocess.Popen([binary, "worker", "--worker-id", "w", "--endpoint", dynamo, "--sqs-endpoint",
                                   f"http://127.0.0.1:{server.server_port}", "--release-queue", "releases.fifo"],
                                  stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True)
        time.sleep(RUN_S)
        if worker.poll() is not None:
            raise AssertionError(f"the worker exited ({worker.returncode})")
        with Stub.lock:
            receives = Stub.counts.get("ReceiveMessage", 0)
        if not 2 <= receives <= RECEIVES_MAX:
            raise AssertionError(f"{receives} ReceiveMessage in {RUN_S:g} s against a queue that answers at once "
                                 f"(expected 2..{RECEIVES_MAX})")
        print(f"PASS release poll: {receives} ReceiveMessage in {RUN_S:g} s from a server that does not long-poll")
        return 0
    except (AssertionError, OSError, subprocess.SubprocessError) as e:
        print(f"FAIL release poll: {e}\n(logs in {workdir})", file=sys.stderr)
        workdir = None
        return 1
    finally:
        if worker is not None and worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(5)
        server.shutdown()
        subprocess.run([os.path.join(REPO, "scripts", "dynalite.sh"), "stop"], env=env, timeout=30,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
