#!/usr/bin/python3
"""`leaseproof control start` and `stop` against dynalite, over ranges.

A start over a range that includes existing connections creates the new ones
and reports the others (exit 0); a STOPPED connection is started again with
the URL given; a stop of a connection that does not exist is named on stderr
and exits 1 after the others were stopped.

Usage: control_start_test.py LEASEPROOF_BINARY
Starts dynalite itself (scripts/dynalite.sh, a private state dir) and ends
it, also on failure. About 5 s.
"""
import subprocess
import sys

from e2e import Processes, fail, run_main


def control(binary, endpoint, *args):
    done = subprocess.run([binary, "control", *args, "--endpoint", endpoint], capture_output=True, text=True,
                          timeout=60)
    return done.returncode, done.stdout.strip(), done.stderr.strip()


def expect(result, status, stdout_has=(), stderr_has=()):
    code, out, err = result
    if code != status or any(s not in out for s in stdout_has) or any(s not in err for s in stderr_has):
        fail(f"expected exit {status} with {stdout_has} / {stderr_has}; got exit {code}: stdout {out!r}, "
             f"stderr {err!r}")
    print(f"ok: exit {code}: {out or err}")


def run(binary, workdir):
    processes = Processes(workdir)
    try:
        endpoint = processes.service("dynalite.sh", "DYNALITE_STATE_DIR", "dynalite")
        expect(control(binary, endpoint, "create-tables"), 0)
        url = "ws://127.0.0.1:9/"
        expect(control(binary, endpoint, "start", "--connections", "c0..c3", "--url", url), 0,
               ["created 4, started again 0 (were STOPPED), already started 0"])
        # c0..c3 exist: reported, not fatal; c4, c5 created.
        expect(control(binary, endpoint, "start", "--connections", "c0..c5", "--url", url), 0,
               ["created 2, started again 0 (were STOPPED), already started 4 (c0 c1 c2 c3)"])
        expect(control(binary, endpoint, "stop", "--connections", "c2"), 0, ["stopped 1 of 1"])
        expect(control(binary, endpoint, "start", "--connections", "c1..c2", "--url", "ws://127.0.0.1:10/"), 0,
               ["created 0, started again 1 (were STOPPED), already started 1 (c1)"])
        owners = subprocess.run([binary, "control", "owners", "--endpoint", endpoint], capture_output=True,
                                text=True, timeout=60).stdout
        row = next((line for line in owners.splitlines() if line.split()[:1] == ["c2"]), "")
        if "STARTED" not in row:
            fail(f"c2 is not STARTED after the restart: {row!r}\n{owners}")
        print(f"ok: control owners: {row}")
        # A stop of one that does not exist is named; the others are stopped.
        expect(control(binary, endpoint, "stop", "--connections", "c5..c7"), 1, ["stopped 1 of 3"],
               ["stop c6: no such connection", "stop c7: no such connection", "failed for 2 of 3"])
    finally:
        processes.stop_all()
    print("PASS control start/stop over ranges")


if __name__ == "__main__":
    sys.exit(run_main("control_start", "control_start_test.py LEASEPROOF_BINARY", run))
