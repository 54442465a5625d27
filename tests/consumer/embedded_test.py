#!/usr/bin/python3
"""The embeddable runtime from an installed prefix, against dynalite.

Installs BUILD_DIR into a temporary prefix, builds tests/consumer/embedded (an
outside CMake project: find_package(leaseproof), leaseproof::runtime) against
it, and runs it as worker `app` against dynalite with three connections
started. Passes when the application
  - gains c0, c1 and c2, records three messages in each and checkpoints them
    (`recorded c0 through 1.3: written`),
  - is stopped on c1 when `control stop` stops it (reason `stopped`), its
    checkpoint after the stop refused without being sent (`stopped`),
  - drains on SIGTERM (c0 and c2 stopped, reason `drained`) and exits 0,
and `control owners` then shows c1's checkpoint at 1:3 in DynamoDB.

Usage: embedded_test.py BUILD_DIR LEASEPROOF_BINARY
dynalite through scripts/dynalite.sh with a private state dir (installed by
`scripts/dynalite.sh install`); every process it started is ended, also on
failure. About 60 s, most of it compiling the application.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "real"))
from e2e import Processes, fail, run_main, tail  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def lines(process):
    with open(process.log_path) as f:
        return f.read().splitlines()


def wait_line(process, wanted, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if wanted in lines(process):
            return
        if process.poll() is not None:
            fail(f"{process.name} exited ({process.returncode}) before '{wanted}': {tail(process)}")
        time.sleep(0.05)
    fail(f"{process.name}: no '{wanted}' within {timeout_s} s: {tail(process)}")


def build(build_dir, workdir):
    prefix = os.path.join(workdir, "prefix")
    subprocess.run(["cmake", "--install", build_dir, "--prefix", prefix], check=True, timeout=120,
                   stdout=subprocess.DEVNULL)
    app_build = os.path.join(workdir, "build")
    for argv in (["cmake", "-S", os.path.join(HERE, "embedded"), "-B", app_build, "-G", "Ninja",
                  "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={prefix}"],
                 ["cmake", "--build", app_build, "-v"]):
        done = subprocess.run(argv, timeout=600, capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"{' '.join(argv[:2])} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    link = [line for line in done.stdout.splitlines() if "-o embedded" in line][-1]
    if "libleaseproof_runtime.a" not in link:
        fail(f"the link line does not name libleaseproof_runtime.a: {link}")
    for unwanted in ("leaseproof_servers", "leaseproof_sim", "leaseproof_models", "hiredis"):
        if unwanted in link:
            fail(f"the link line names {unwanted}: {link}")
    print(f"built against {prefix}: links libleaseproof_runtime.a, no servers, simulator or models")
    return os.path.join(app_build, "embedded")


def run(build_dir, binary, workdir):
    app_binary = build(build_dir, workdir)
    processes = Processes(workdir)
    try:
        dynamo = processes.service("dynalite.sh", "DYNALITE_STATE_DIR", "dynalite")
        control = [binary, "control"]
        subprocess.run(control + ["create-tables", "--endpoint", dynamo], check=True, timeout=60, capture_output=True)
        subprocess.run(control + ["start", "--endpoint", dynamo, "--connections", "c0..c2", "--url",
                                  "ws://127.0.0.1:9/"], check=True, timeout=60, capture_output=True)
        env = dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")
        app = processes.start("embedded", [app_binary, dynamo, "app"], env=env)
        for connection in ("c0", "c1", "c2"):
            wait_line(app, f"recorded {connection} through 1.3: written", 20)
        gained = [line for line in lines(app) if line.startswith("gained ")]
        if sorted(line.split()[1] for line in gained) != ["c0", "c1", "c2"]:
            fail(f"gained {gained}, expected c0, c1 and c2 once each")
        subprocess.run(control + ["stop", "--endpoint", dynamo, "--connections", "c1"], check=True, timeout=60,
                       capture_output=True)
        wait_line(app, "checkpoint after the stop of c1: stopped", 20)
        if not any(line.startswith("stopped c1 epoch ") and line.endswith(": stopped") for line in lines(app)):
            fail(f"c1 was not stopped for reason 'stopped': {tail(app)}")
        app.send_signal(signal.SIGTERM)
        app.wait(20)
        output = lines(app)
        if app.returncode != 0:
            fail(f"the application exited {app.returncode}: {tail(app)}")
        for connection in ("c0", "c2"):
            if not any(line.startswith(f"stopped {connection} epoch ") and line.endswith(": drained") for line in output):
                fail(f"{connection} was not stopped for reason 'drained': {tail(app)}")
        if output[-1] != "done: gained 3, stopped 3, acting on 0":
            fail(f"last line {output[-1]!r}")
        owners = subprocess.run(control + ["owners", "--endpoint", dynamo], check=True, timeout=60,
                                capture_output=True, text=True).stdout
        c1 = [line for line in owners.splitlines() if line.split()[:1] == ["c1"]]
        print("\n".join(output))
        print("\n".join(c1))
        if not c1 or not c1[0].endswith(" 1:3"):
            fail(f"control owners does not show c1's checkpoint at 1.3: {owners}")
    finally:
        processes.stop_all()


if __name__ == "__main__":
    sys.exit(run_main("embedded", "embedded_test.py BUILD_DIR LEASEPROOF_BINARY", run))
