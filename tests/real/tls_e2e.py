#!/usr/bin/python3
"""DynamoDB over https end to end: `leaseproof control` and `leaseproof worker`
against dynalite behind a TLS proxy (tests/real/tls_proxy.py) whose
certificates come from a CA this test makes (tests/real/make_test_pki.sh).

Passes when
  - control reaches the endpoint trusting the test CA by --ca-file and by
    AWS_CA_BUNDLE, and fails without it (the system store does not know it);
  - a worker holds leases over https and records published messages it
    streams over wss:// from `leaseproof hub --tls-cert/--tls-key` (publishes
    over https to the same port);
  - `leaseproof subscribe wss://... --ca-file` records them too, and without
    --ca-file logs the untrusted certificate and records nothing;
  - a worker whose hub presents a certificate for another host logs
    stream.connect_error naming the mismatch, and records nothing from it;
  - a certificate for another host, an expired one, one from an untrusted CA
    and a plain-http server behind an https:// URL each fail with exit 1 and
    a message naming the endpoint and the reason, within seconds;
  - a worker left running against the expired certificate stays up, logs
    the reason (dynamo.transport_error) and makes no more TLS connections than
    its schedule asks for (no retry storm);
  - a CA file that does not exist is refused with exit 2, naming --ca-file.

Usage: tls_e2e.py LEASEPROOF_BINARY
Starts everything on 127.0.0.1 itself (dynalite through scripts/dynalite.sh
in a private state dir; `scripts/dynalite.sh install` first) and ends every
process it started, also on failure. About 20 s.
"""
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request

from e2e import Processes, events, fail, metrics, run_main, tail, wait_file

HERE = os.path.dirname(os.path.abspath(__file__))
# The worker against the expired certificate: its reconcile and the lease
# timings below bound how many connections it may open in STORM_WINDOW_S.
STORM_WINDOW_S = 6.0
STORM_CONNECTIONS_MAX = 40


def control(binary, args, env=None, timeout=30):
    started = time.monotonic()
    done = subprocess.run([binary, "control"] + args, capture_output=True, text=True, timeout=timeout, env=env)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def run(binary, workdir):
    processes = Processes(workdir)
    try:
        pki = os.path.join(workdir, "pki")
        subprocess.run([os.path.join(HERE, "make_test_pki.sh"), pki], check=True, capture_output=True, timeout=120)
        ca = os.path.join(pki, "ca.pem")
        plain = processes.service("dynalite.sh", "DYNALITE_STATE_DIR", "dynalite")
        ports_path, counts_path = os.path.join(workdir, "proxy.ports"), os.path.join(workdir, "proxy.counts")
        listeners = [f"{name}={pki}/{name}.pem,{pki}/{name}.key" for name in ("good", "wrong-host", "expired",
                                                                             "untrusted")]
        processes.start("tls-proxy", ["/usr/bin/python3", os.path.join(HERE, "tls_proxy.py"), "--target",
                                      plain.removeprefix("http://"), "--port-file", ports_path, "--counts",
                                      counts_path] + listeners)
        ports = json.loads(wait_file(ports_path, 10))
        url = {name: f"https://localhost:{port}" for name, port in ports.items()}

        # The good certificate: trusted through --ca-file, through AWS_CA_BUNDLE, not without either.
        status, output, _ = control(binary, ["create-tables", "--endpoint", url["good"], "--ca-file", ca])
        if status != 0:
            fail(f"create-tables over https with --ca-file: exit {status}: {output}")
        bundle_env = dict(os.environ, AWS_CA_BUNDLE=ca)
        status, output, _ = control(binary, ["owners", "--endpoint", url["good"]], env=bundle_env)
        if status != 0:
            fail(f"owners over https with AWS_CA_BUNDLE: exit {status}: {output}")
        status, output, _ = control(binary, ["owners", "--endpoint", url["good"]])
        if status != 1 or "signed by no CA this process trusts" not in output:
            fail(f"owners without the test CA: exit {status}, expected 1 and an untrusted certificate: {output}")
        print(f"PASS trust: {url['good']} reached with --ca-file and with AWS_CA_BUNDLE, refused without them")

        # The four failures, each named, each quick (no retries behind the user's back).
        cases = [
            ("wrong-host", url["wrong-host"], "certificate rejected: hostname mismatch"),
            ("expired", url["expired"], "certificate rejected: certificate has expired"),
            ("untrusted", url["untrusted"], "certificate rejected: unable to get local issuer certificate"),
            ("plain http", "https://" + plain.removeprefix("http://"), "the server does not speak TLS"),
        ]
        for name, endpoint, reason in cases:
            status, output, seconds = control(binary, ["owners", "--endpoint", endpoint, "--ca-file", ca])
            if status != 1 or f"tls_failed: TLS with {endpoint}: " not in output or reason not in output:
                fail(f"{name}: exit {status} after {seconds:.1f} s, expected 1 naming {endpoint} and "
                     f"'{reason}': {output}")
            if seconds > 10:
                fail(f"{name}: took {seconds:.1f} s to fail")
            print(f"PASS {name}: exit 1 in {seconds:.2f} s: {output.strip().splitlines()[-1]}")
        status, output, _ = control(binary, ["owners", "--endpoint", url["good"], "--ca-file",
                                             os.path.join(workdir, "missing.pem")])
        if status != 2 or "--ca-file" not in output:
            fail(f"a missing --ca-file: exit {status}, expected 2 naming --ca-file: {output}")
        print("PASS a missing CA file: exit 2 naming --ca-file")
        # The mirror case: http:// at the TLS port. The proxy drops the plaintext request unanswered.
        endpoint = url["good"].replace("https://localhost", "http://127.0.0.1")
        status, output, seconds = control(binary, ["create-tables", "--endpoint", endpoint])
        if status != 1 or f"from {endpoint} before any HTTP answer (if that port speaks TLS, use https://)" not in output:
            fail(f"http:// at a TLS port: exit {status} after {seconds:.1f} s, expected 1 naming {endpoint} and "
                 f"https://: {output}")
        print(f"PASS http:// at a TLS port: exit 1 in {seconds:.2f} s: {output.strip().splitlines()[-1]}")

        # A worker holds leases and records over https.
        # The hub's TLS flags, refused with exit 2 naming the flag; subscribe's --ca-file too.
        for args, flag in [(["hub", "--tls-cert", f"{pki}/good.pem"], "--tls-cert: needs --tls-key"),
                           (["hub", "--tls-cert", f"{pki}/good.pem", "--tls-key", f"{pki}/expired.key"],
                            "is not the private key of the certificate"),
                           (["hub", "--tls-cert", os.path.join(workdir, "missing.pem"), "--tls-key",
                             f"{pki}/good.key"], "--tls-cert: "),
                           (["subscribe", "ws://127.0.0.1:1/", "--channel", "c0", "--ca-file", ca],
                            "--ca-file: only for a wss:// URL")]:
            done = subprocess.run([binary] + args, capture_output=True, text=True, timeout=10)
            if done.returncode != 2 or flag not in done.stderr:
                fail(f"{' '.join(args)}: exit {done.returncode}, expected 2 and '{flag}': {done.stderr}")
        print("PASS hub --tls-cert/--tls-key and subscribe --ca-file: bad values refused with exit 2 naming the flag")

        hub_tls = {}  # the hub's own TLS, one hub per certificate
        for name in ("good", "wrong-host"):
            hub_port_file = os.path.join(workdir, f"hub-{name}.port")
            processes.start(f"hub-{name}", [binary, "hub", "--epoch", "1", "--port-file", hub_port_file,
                                            "--tls-cert", f"{pki}/{name}.pem", "--tls-key", f"{pki}/{name}.key"])
            hub_tls[name] = int(wait_file(hub_port_file, 10))
        hub_port = hub_tls["good"]
        trust_ca = ssl.create_default_context(cafile=ca)
        status, output, _ = control(binary, ["start", "--endpoint", url["good"], "--ca-file", ca, "--connections",
                                             "c0..c3", "--url", f"wss://localhost:{hub_tls['good']}/"])
        if status != 0:
            fail(f"control start over https: exit {status}: {output}")
        worker_port_file = os.path.join(workdir, "worker.port")
        flags = ["--lease", "6s", "--heartbeat", "2s", "--margin", "1s", "--reconcile", "2s"]
        worker = processes.start("worker", [binary, "worker", "--worker-id", "w-tls", "--endpoint", url["good"],
                                            "--ca-file", ca, "--http", "127.0.0.1:0", "--port-file",
                                            worker_port_file] + flags)
        worker_status = int(wait_file(worker_port_file, 10))
        deadline = time.monotonic() + 20
        while len({e["connection"] for e in events(worker) if e.get("event") == "lease.open"}) < 4:
            if time.monotonic() > deadline or worker.poll() is not None:
                fail(f"the worker did not open c0..c3 over https within 20 s: {tail(worker)}")
            time.sleep(0.1)
        for _ in range(5):
            for c in ("c0", "c1", "c2", "c3"):
                urllib.request.urlopen(urllib.request.Request(
                    f"https://127.0.0.1:{hub_port}/publish?channel={c}&count=1&size=64", data=b"", method="POST"),
                    timeout=5, context=trust_ca).read()
        deadline = time.monotonic() + 15
        while True:  # every message recorded, and each lease renewed at least once
            values = metrics(worker_status)
            records = int(values.get("leaseproof_worker_records_total", "0"))
            renews = int(values.get('leaseproof_worker_calls_total{kind="renew"}', "0"))
            if records >= 20 and renews >= 4:
                break
            if time.monotonic() > deadline:
                fail(f"over https within 15 s: {records} of 20 records, {renews} of 4 renews: {tail(worker)}")
            time.sleep(0.1)
        print(f"PASS worker over https and wss: 4 leases held, {values['leaseproof_worker_records_total']} records, "
              f"{renews} renews, {values.get('leaseproof_worker_dynamo_ambiguous_total', '0')} requests without an answer")
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(15)

        # subscribe over wss: with the CA it records c0's five messages; without it, nothing, and says why.
        summary_path = os.path.join(workdir, "subscribe.json")
        done = subprocess.run([binary, "subscribe", f"wss://127.0.0.1:{hub_port}/", "--channel", "c0", "--ca-file", ca,
                               "--until-seq", "5", "--duration", "10s", "--summary", summary_path],
                              capture_output=True, text=True, timeout=30)
        summary = json.load(open(summary_path)) if os.path.exists(summary_path) else {}
        if done.returncode != 0 or summary.get("recorded") != 5:
            fail(f"subscribe over wss with --ca-file: exit {done.returncode}, summary {summary}: "
                 f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
        done = subprocess.run([binary, "subscribe", f"wss://127.0.0.1:{hub_port}/", "--channel", "c0", "--duration",
                               "2s", "--summary", summary_path], capture_output=True, text=True, timeout=30)
        summary = json.load(open(summary_path))
        said = [line for line in done.stdout.splitlines() if "TLS with wss://" in line]
        if (done.returncode != 0 or summary.get("recorded") != 0 or summary.get("connect_failures", 0) < 1 or not said
                or "signed by no CA this process trusts" not in said[0]):
            fail(f"subscribe over wss without the CA: exit {done.returncode}, summary {summary}: {done.stdout[-2000:]}")
        print(f"PASS subscribe over wss: 5 of 5 recorded with --ca-file; without it "
              f"{summary['connect_failures']} failed connects, {len(said)} log lines: {said[0]}")

        # The hub behind a certificate for another host: the stream never opens, and the log says why.
        wrong_hub = processes.start("worker-wrong-hub", [binary, "worker", "--worker-id", "w-wrong-hub", "--endpoint",
                                                         url["good"], "--ca-file", ca, "--hub",
                                                         f"wss://localhost:{hub_tls['wrong-host']}/"] + flags)
        deadline = time.monotonic() + 20
        while not [e for e in events(wrong_hub) if e.get("event") == "stream.connect_error"]:
            if time.monotonic() > deadline or wrong_hub.poll() is not None:
                fail(f"no stream.connect_error from a hub with another host's certificate: {tail(wrong_hub)}")
            time.sleep(0.1)
        error = [e for e in events(wrong_hub) if e.get("event") == "stream.connect_error"][0]["error"]
        if f"TLS with wss://localhost:{hub_tls['wrong-host']}: certificate rejected: hostname mismatch" not in error:
            fail(f"stream.connect_error does not name the endpoint and the mismatch: {error}")
        print(f"PASS wss to a hub with another host's certificate: {error}")
        os.killpg(wrong_hub.pid, signal.SIGTERM)
        wrong_hub.wait(15)

        # A worker against the expired certificate: it says why, and does not storm.
        before = json.load(open(counts_path))["expired"]["accepted"]
        stuck = processes.start("worker-expired", [binary, "worker", "--worker-id", "w-expired", "--endpoint",
                                                   url["expired"], "--ca-file", ca] + flags)
        time.sleep(STORM_WINDOW_S)
        if stuck.poll() is not None:
            fail(f"the worker against an expired certificate exited ({stuck.returncode}): {tail(stuck)}")
        connections = json.load(open(counts_path))["expired"]["accepted"] - before
        logged = [e for e in events(stuck) if e.get("event") == "dynamo.transport_error"]
        if not logged or "certificate has expired" not in logged[0].get("detail", ""):
            fail(f"the worker did not log the expired certificate: {tail(stuck)}")
        if not 1 <= connections <= STORM_CONNECTIONS_MAX:
            fail(f"the worker opened {connections} TLS connections in {STORM_WINDOW_S} s "
                 f"(expected 1..{STORM_CONNECTIONS_MAX})")
        print(f"PASS no retry storm: {connections} TLS connections in {STORM_WINDOW_S:g} s, "
              f"{len(logged)} log lines: {logged[0]['detail']}")
        print("PASS tls: DynamoDB over https, and each certificate failure named")
    finally:
        processes.stop_all()


def main():
    return run_main("tls", "tls_e2e.py LEASEPROOF_BINARY", run)


if __name__ == "__main__":
    sys.exit(main())
