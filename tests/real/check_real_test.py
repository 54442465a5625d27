#!/usr/bin/python3
"""`leaseproof check-real` on hand-made records: each case is a small set of
worker logs, lab events and hub sessions with a known verdict. The faults the
checkers guard against are given to them (two workers acting at once, a
resumed worker acting before it closes, two workers' frames overlapping at the
hub, a takeover slower than the bound), and the clean cases must pass with
something checked.

  check_real_test.py path/to/leaseproof
"""

import json
import os
import subprocess
import sys
import tempfile

CONFIG = {"algorithm": "core", "expiry": "wall", "lease_ms": 6000, "heartbeat_ms": 2000, "margin_ms": 1000,
          "reconcile_ms": 3000, "reconcile_jitter_ms": 3000, "watch_ms": 5000, "request_timeout_ms": 2000,
          "capacity": 10}


def start(worker, at):
    return dict(CONFIG, event="worker.start", worker=worker, mono_ms=at, t_ms=at)


def lease(event, worker, at, connection="c0", epoch=1, reason=None):
    line = {"event": event, "worker": worker, "mono_ms": at, "t_ms": at, "connection": connection, "epoch": epoch}
    if reason:
        line["reason"] = reason
    return line


def lab(event, at, **fields):
    return dict(fields, event=event, mono_ms=at)


def session(worker, epoch, first_in, last_in, channel="c0"):
    return {"session": 1, "channel": channel, "worker": worker, "lease_epoch": epoch, "opened_ms": first_in - 1,
            "first_in_ms": first_in, "last_in_ms": last_in, "ended_ms": last_in + 1, "frames_in": 3, "data_out": 3}


# name -> (files {name: [lines]}, expected exit status, text the output must contain)
CASES = {
    "clean crash takeover": ({
        "w1.log": [start("w1", 0), lease("lease.open", "w1", 100)],
        "w2.log": [start("w2", 0), lease("lease.open", "w2", 9000, epoch=2)],
        "lab.jsonl": [lab("control.started", 50, connection="c0"), lab("lab.kill", 2000, worker="w1")],
        "hub.jsonl": [session("w1", 1, 150, 1900), session("w2", 2, 9050, 9500)],
    }, 0, "crash: gaps 1"),
    "two workers acting at once": ({
        "w1.log": [start("w1", 0), lease("lease.open", "w1", 100), lease("lease.close", "w1", 5000, reason="lost")],
        "w2.log": [start("w2", 0), lease("lease.open", "w2", 4000, epoch=2)],
        "lab.jsonl": [lab("control.started", 50, connection="c0")],
    }, 1, "connection c0 had two acting owners for 1s"),
    "a resumed worker closes at once": ({
        "w1.log": [start("w1", 0), lease("lease.open", "w1", 100),
                   lease("lease.close", "w1", 12000.5, reason="deadline")],
        "w2.log": [start("w2", 0), lease("lease.open", "w2", 9000, epoch=2)],
        "lab.jsonl": [lab("control.started", 50, connection="c0"), lab("lab.stop", 1000, worker="w1"),
                      lab("lab.cont", 12000, worker="w1")],
    }, 0, "pause: gaps 1"),
    "a resumed worker acts before it closes": ({
        "w1.log": [start("w1", 0), lease("lease.open", "w1", 100),
                   {"event": "resume.recorded", "worker": "w1", "mono_ms": 12000.5, "connection": "c0"},
                   lease("lease.close", "w1", 12003, reason="deadline")],
        "w2.log": [start("w2", 0), lease("lease.open", "w2", 9000, epoch=2)],
        "lab.jsonl": [lab("control.started", 50, connection="c0"), lab("lab.stop", 1000, worker="w1"),
                      lab("lab.cont", 12000, worker="w1")],
    }, 1, "connection c0 had two acting owners for 2.5ms"),
    "two workers' frames overlap at the hub": ({
        "w1.log": [start("w1", 0), lease("lease.open", "w1", 100), lease("lease.close", "w1", 3000, reason="lost")],
        "w2.log": [start("w2", 0), lease("lease.open", "w2", 3000, epoch=2)],
        "lab.jsonl": [lab("control.started", 50, connection="c0")],
        "hub.jsonl": [session("w1", 1, 150, 3500), session("w2", 2, 3100, 5000)],
    }, 1, "hub: c0: w1 (lease epoch 1) sent frames until 3.500 s and w2 (lease epoch 2) from 3.100 s"),
    "a takeover slower than the crash bound": ({
        "w1.log": [start("w1", 0), lease("lease.open", "w1", 100)],
        "w2.log": [start("w2", 0), lease("lease.open", "w2", 60000, epoch=2)],
        "lab.jsonl": [lab("control.started", 50, connection="c0"), lab("lab.kill", 2000, worker="w1")],
    }, 1, "recovery: 1 violations"),
    # 15 s from the kill to the next owner: within the sweep's bound (22.9 s),
    # beyond the watcher's (12.2 s). A worker that logged lease.watch for the
    # lease is the watcher's path, judged by the tighter bound.
    "a watched takeover slower than the watcher's bound": ({
        "w1.log": [start("w1", 0), lease("lease.open", "w1", 100)],
        "w2.log": [start("w2", 0), lease("lease.watch", "w2", 1000), lease("lease.open", "w2", 17000, epoch=2)],
        "lab.jsonl": [lab("control.started", 50, connection="c0"), lab("lab.kill", 2000, worker="w1")],
    }, 1, "beyond the watcher's bound"),
    "the same takeover unwatched is judged by the sweep's bound": ({
        "w1.log": [start("w1", 0), lease("lease.open", "w1", 100)],
        "w2.log": [start("w2", 0), lease("lease.open", "w2", 17000, epoch=2)],
        "lab.jsonl": [lab("control.started", 50, connection="c0"), lab("lab.kill", 2000, worker="w1")],
    }, 0, "(0 by the watcher's bound, 1 by the sweep's)"),
    "workers configured differently": ({
        "w1.log": [start("w1", 0), lease("lease.open", "w1", 100)],
        "w2.log": [dict(start("w2", 0), lease_ms=20000)],
        "lab.jsonl": [lab("control.started", 50, connection="c0")],
    }, 0, "workers configured differently"),
    "no configuration": ({
        "w1.log": [lease("lease.open", "w1", 100)],
        "lab.jsonl": [lab("control.started", 50, connection="c0")],
    }, 2, "no worker.start line"),
}


def run(binary, files, workdir):
    argv = [binary, "check-real"]
    for name, lines in files.items():
        path = os.path.join(workdir, name)
        with open(path, "w") as f:
            f.write("plain text lines are skipped\n")
            for line in lines:
                f.write(json.dumps(line) + "\n")
        argv += ["--sessions", path] if name == "hub.jsonl" else ["--events", path]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr


def main():
    binary = sys.argv[1]
    failures = 0
    for name, (files, expected, needle) in CASES.items():
        with tempfile.TemporaryDirectory() as workdir:
            status, output = run(binary, files, workdir)
        ok = status == expected and needle in output
        if expected == 0 and "checked 0 acting intervals" in output:
            ok = False  # a pass that checked nothing proves nothing
        print(f"{'PASS' if ok else 'FAIL'} {name}: exit {status} (expected {expected})")
        if not ok:
            failures += 1
            print(f"    expected the output to contain: {needle}\n" + "\n".join(f"    | {l}" for l in output.splitlines()))
    with tempfile.TemporaryDirectory() as workdir:
        done = subprocess.run([binary, "check-real", "--events", os.path.join(workdir, "missing")], capture_output=True,
                              text=True, timeout=60)
    ok = done.returncode == 2 and "--events: cannot read" in done.stderr
    print(f"{'PASS' if ok else 'FAIL'} a missing file: exit {done.returncode}")
    failures += not ok
    print(f"check_real_test: {len(CASES) + 1 - failures} of {len(CASES) + 1} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
