"""What the end-to-end scripts share: the processes they start (and always
end), reading the workers' JSON-lines logs, waiting for files and events,
/metrics, and a main that runs a test in a scratch directory and reports.
Used by release_notice_e2e.py, tls_e2e.py and tests/package/deploy_test.py.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def fail(message):
    raise AssertionError(message)


class Processes:
    """Everything a test started, ended in reverse order by its own PID."""

    def __init__(self, workdir):
        self.workdir, self.started, self.services = workdir, [], []

    def start(self, name, argv, env=None):
        log_path = os.path.join(self.workdir, f"{name}.log")
        process = subprocess.Popen(argv, stdout=open(log_path, "w"), stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        process.name, process.log_path = name, log_path
        self.started.append(process)
        return process

    def service(self, script, state_variable, name):
        """dynalite or fauxqs via its script, in a private state dir; returns its endpoint.
        Not installed: the script's start says which install command to run."""
        env = dict(os.environ, **{state_variable: os.path.join(self.workdir, name)})
        self.services.append((script, env))
        done = subprocess.run([os.path.join(REPO, "scripts", script), "start"], env=env, timeout=60,
                              capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"scripts/{script} start failed: {done.stderr.strip()}")
        return done.stdout.strip()

    def stop_all(self):
        for process in reversed(self.started):
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(5)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass
        for script, env in reversed(self.services):
            subprocess.run([os.path.join(REPO, "scripts", script), "stop"], env=env, timeout=30,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def events(process):
    """The JSON lines of a process's log."""
    out = []
    with open(process.log_path) as f:
        for line in f:
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return out


def tail(process, lines=8):
    with open(process.log_path) as f:
        return " | ".join(f.read().splitlines()[-lines:])


def wait_for(process, predicate, timeout_s, what):
    """The first event of `process` that satisfies `predicate`, within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [e for e in events(process) if predicate(e)]
        if found:
            return found[0]
        if process.poll() is not None:
            fail(f"{process.name} exited ({process.returncode}) before {what}: {tail(process)}")
        time.sleep(0.05)
    fail(f"{process.name}: no {what} within {timeout_s} s: {tail(process)}")


def wait_file(path, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if os.path.exists(path) and open(path).read().strip():
            return open(path).read().strip()
        time.sleep(0.02)
    fail(f"{path} not written within {timeout_s} s")


def metrics(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))


def run_main(name, usage, run):
    """Calls run(*arguments, workdir) with each argument's absolute path, the
    last one an executable; prints FAIL and keeps the scratch directory on
    failure (and with LEASEPROOF_KEEP). Returns the exit status."""
    arguments = sys.argv[1:]
    if len(arguments) != len(usage.split()) - 1 or not arguments or not os.access(arguments[-1], os.X_OK):
        print(f"usage: {usage}", file=sys.stderr)
        return 2
    workdir = tempfile.mkdtemp(prefix=f"leaseproof-{name}-")
    try:
        run(*[os.path.abspath(a) for a in arguments], workdir)
    except (AssertionError, RuntimeError, OSError, subprocess.SubprocessError, ValueError, KeyError,
            StopIteration) as e:
        print(f"FAIL {name}: {e!r}\n(logs in {workdir})", file=sys.stderr)
        return 1
    if os.environ.get("LEASEPROOF_KEEP"):
        print(f"(logs in {workdir})")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0
