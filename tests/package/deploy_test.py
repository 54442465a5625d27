#!/usr/bin/python3
"""The deployment files, checked and run as far as this machine allows.

deploy/Dockerfile builds the image from the Debian package; deploy/ecs-worker-task.json
(an ECS task definition) and deploy/k8s-workers.yaml (a StatefulSet) run `leaseproof
worker` from it; deploy/gate-shards.k8s.yaml runs the gate from it. No container engine
runs here, so this test:
  - checks the Dockerfile: Debian 12, the package installed with apt-get, the CA store,
    the regressions file in /work, `leaseproof` as the entry point;
  - checks that every manifest names the image the Dockerfile documents
    (leaseproof:<the project's version>);
  - checks the ECS task (a health check on /healthz at the worker's --http port, a stop
    timeout above --drain-timeout) and the StatefulSet (the pod name as --worker-id, a
    grace period above --drain-timeout, --capacity with a note on sizing it, liveness
    on /healthz and readiness on /readyz at the --http port, Prometheus scrape
    annotations naming that port and /metrics, a PodDisruptionBudget, an IRSA role
    annotation to replace, an image registry to replace, the force-delete warning);
  - builds the package (cpack), extracts it, and runs each worker command as the
    container would (the ECS one through `sh -c`, the StatefulSet's with $(POD_NAME)
    filled in as Kubernetes does) against dynalite, reached through
    AWS_ENDPOINT_URL_DYNAMODB instead of the region's endpoint; runs the ECS health
    check's command while the worker runs and after it has stopped; then sends SIGTERM
    and requires the worker to drain and exit 0 within the stop timeout; /readyz must
    answer 200 once the worker has reached dynalite.

Usage: deploy_test.py BUILD_DIR LEASEPROOF_BINARY
Starts dynalite itself (scripts/dynalite.sh, a private state dir) and ends every process
it started, also on failure. About 20 s.
"""
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "real"))
from e2e import fail, run_main  # noqa: E402  (tests/real/e2e.py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "deploy")


def project_version():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    return re.search(r"project\(leaseproof VERSION ([0-9.]+)", text).group(1)


def flag(argv, name):
    """The value after `name` in an argument list."""
    if name not in argv:
        fail(f"{name} is not in {argv}")
    return argv[argv.index(name) + 1]


def seconds(duration):
    match = re.fullmatch(r"([0-9]+)s", duration)
    if not match:
        fail(f"'{duration}' is not whole seconds")
    return int(match.group(1))


def check_dockerfile(image):
    text = open(os.path.join(DEPLOY, "Dockerfile")).read()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    if not lines[0].startswith("FROM debian:12"):
        fail(f"the Dockerfile starts {lines[0]!r}, not FROM debian:12")
    run = " ".join(line for line in text.replace("\\\n", " ").splitlines() if line.startswith("RUN"))
    if "apt-get install" not in run or "/tmp/leaseproof.deb" not in run or "ca-certificates" not in run:
        fail(f"the Dockerfile does not install the package and the CA store with apt-get: {run}")
    if 'ENTRYPOINT ["leaseproof"]' not in text:
        fail("the Dockerfile's entry point is not leaseproof")
    if "COPY tests/gate/regressions.jsonl /work/tests/gate/regressions.jsonl" not in text:
        fail("the Dockerfile does not put the gate's regressions in /work")
    if f"-t {image}" not in text:
        fail(f"the Dockerfile does not document its tag {image}")
    print(f"PASS Dockerfile: debian:12, the package by apt-get, entry point leaseproof, tag {image}")


def check_ecs(image):
    task = json.load(open(os.path.join(DEPLOY, "ecs-worker-task.json")))
    container = task["containerDefinitions"][0]
    if container["image"] != image:
        fail(f"the ECS task's image is {container['image']}, not {image}")
    if container["entryPoint"] != ["sh", "-c"] or len(container["command"]) != 1:
        fail("the ECS task runs its command through sh -c")
    argv = shlex.split(container["command"][0])
    if argv[:3] != ["exec", "leaseproof", "worker"]:
        fail(f"the ECS task's command is not `exec leaseproof worker ...`: {argv}")
    port = flag(argv, "--http").rsplit(":", 1)[1]
    drain = seconds(flag(argv, "--drain-timeout"))
    health = " ".join(container["healthCheck"]["command"])
    if f"127.0.0.1:{port}/healthz" not in health:
        fail(f"the ECS health check ({health}) does not ask /healthz on the --http port {port}")
    if not container["stopTimeout"] > drain:
        fail(f"the ECS stop timeout {container['stopTimeout']} s is not above --drain-timeout {drain} s")
    print(f"PASS ECS task: image {image}, health check on :{port}/healthz, stop timeout "
          f"{container['stopTimeout']} s > drain {drain} s")
    return container, int(port), container["stopTimeout"]


def check_statefulset(image):
    text = open(os.path.join(DEPLOY, "k8s-workers.yaml")).read()
    documents = list(yaml.safe_load_all(text))
    statefulset = next(d for d in documents if d["kind"] == "StatefulSet")
    pod = statefulset["spec"]["template"]
    container = pod["spec"]["containers"][0]
    if container["image"] != f"REGISTRY/{image}":
        fail(f"the StatefulSet's image is {container['image']}, not REGISTRY/{image} (a registry to replace)")
    argv = container["args"]
    if argv[0] != "worker" or flag(argv, "--worker-id") != "$(POD_NAME)":
        fail(f"the StatefulSet does not run `worker --worker-id $(POD_NAME)`: {argv}")
    pod_name = next(e for e in container["env"] if e["name"] == "POD_NAME")
    if pod_name.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "metadata.name":
        fail("POD_NAME does not come from the pod's metadata.name")
    port = int(flag(argv, "--http").rsplit(":", 1)[1])
    drain = seconds(flag(argv, "--drain-timeout"))
    grace = pod["spec"]["terminationGracePeriodSeconds"]
    if not grace > drain:
        fail(f"the grace period {grace} s is not above --drain-timeout {drain} s")
    capacity = flag(argv, "--capacity")
    if capacity is None or not capacity.isdigit() or "--capacity" not in text.split("apiVersion")[0]:
        fail("the StatefulSet passes no --capacity, or the file's header does not say how to size it")
    probes = {"livenessProbe": "/healthz", "readinessProbe": "/readyz"}
    for probe, path in probes.items():
        got = container.get(probe, {}).get("httpGet")
        if got != {"path": path, "port": port}:
            fail(f"the {probe} {got} is not {path} on the --http port {port}")
    annotations = pod["metadata"]["annotations"]
    wanted = {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": "/metrics"}
    if any(annotations.get(k) != v for k, v in wanted.items()):
        fail(f"the scrape annotations {annotations} are not {wanted}")
    if statefulset["spec"]["serviceName"] not in [d["metadata"]["name"] for d in documents if d["kind"] == "Service"]:
        fail("the StatefulSet's serviceName names no Service in the file")
    budgets = [d for d in documents if d["kind"] == "PodDisruptionBudget"]
    labels = pod["metadata"]["labels"]
    if not budgets or budgets[0]["spec"].get("selector", {}).get("matchLabels") != labels:
        fail(f"no PodDisruptionBudget selects the StatefulSet's pods ({labels})")
    account = next((d for d in documents if d["kind"] == "ServiceAccount"
                    and d["metadata"]["name"] == pod["spec"]["serviceAccountName"]), None)
    role = (account or {}).get("metadata", {}).get("annotations", {}).get("eks.amazonaws.com/role-arn", "")
    if "ACCOUNT_ID" not in role:
        fail(f"the service account has no IRSA role annotation to replace (eks.amazonaws.com/role-arn: {role!r})")
    if "force-delete" not in text or "same --worker-id" not in text:
        fail("the file does not warn against force-deleting a worker pod (two processes with one worker id)")
    print(f"PASS StatefulSet: image REGISTRY/{image}, --worker-id $(POD_NAME), --capacity {capacity}, grace {grace} s "
          f"> drain {drain} s, liveness /healthz and readiness /readyz on :{port}, scraped, a disruption budget, "
          f"an IRSA role to replace, the force-delete warning")
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    return argv, env, port, grace


def check_gate_images(image):
    for document in yaml.safe_load_all(open(os.path.join(DEPLOY, "gate-shards.k8s.yaml"))):
        if document["kind"] != "Job":
            continue
        for container in document["spec"]["template"]["spec"]["containers"]:
            if container["image"] != f"REGISTRY/{image}":
                fail(f"the gate Job {document['metadata']['name']} names {container['image']}, not REGISTRY/{image}")
    print(f"PASS gate Jobs: image REGISTRY/{image}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probe(port, path):
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2).status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, OSError):
        return None


def healthz(port):
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def run_worker(name, argv, env, port, stop_timeout, health_command, workdir):
    """Runs one worker command as its container would; checks /healthz, the health
    check's own command when there is one, and a drain within the stop timeout."""
    log_path = os.path.join(workdir, f"{name}.log")
    process = subprocess.Popen(argv, env=env, stdout=open(log_path, "w"), stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while healthz(port) != 200:
            if time.monotonic() > deadline or process.poll() is not None:
                fail(f"{name}: /healthz not 200 within 15 s (exit {process.poll()}): {open(log_path).read()[-800:]}")
            time.sleep(0.1)
        while probe(port, "/readyz") != 200:
            if time.monotonic() > deadline or process.poll() is not None:
                fail(f"{name}: /readyz not 200 within 15 s (exit {process.poll()}): {open(log_path).read()[-800:]}")
            time.sleep(0.1)
        if health_command is not None:
            checked = subprocess.run(["sh", "-c", health_command], capture_output=True, timeout=10)
            if checked.returncode != 0:
                fail(f"{name}: the health check `{health_command}` failed while the worker runs")
        started = time.monotonic()
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(stop_timeout)
        except subprocess.TimeoutExpired:
            fail(f"{name}: still running {stop_timeout} s after SIGTERM (the orchestrator's stop timeout)")
        if process.returncode != 0:
            fail(f"{name}: exited {process.returncode} after SIGTERM: {open(log_path).read()[-800:]}")
        if health_command is not None and subprocess.run(["sh", "-c", health_command], capture_output=True,
                                                         timeout=10).returncode == 0:
            fail(f"{name}: the health check passes with the worker gone")
        log = open(log_path).read()
        if '"event":"worker.stop"' not in log:
            fail(f"{name}: no worker.stop line: {log[-800:]}")
        print(f"PASS {name}: ran from the package, /healthz and /readyz 200, drained in "
              f"{time.monotonic() - started:.2f} s")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)


def run(build, binary, workdir):
    image = f"leaseproof:{project_version()}"
    check_dockerfile(image)
    ecs, ecs_port, ecs_stop = check_ecs(image)
    k8s_argv, k8s_env, k8s_port, k8s_grace = check_statefulset(image)
    check_gate_images(image)

    subprocess.run(["cpack", "-G", "DEB", "--config", os.path.join(build, "CPackConfig.cmake"), "-B",
                    os.path.join(workdir, "package")], check=True, capture_output=True, timeout=300)
    deb = next(f for f in os.listdir(os.path.join(workdir, "package")) if f.endswith(".deb"))
    root = os.path.join(workdir, "root")
    subprocess.run(["dpkg-deb", "-x", os.path.join(workdir, "package", deb), root], check=True, timeout=60)
    bin_dir = os.path.join(root, "usr", "bin")

    dynalite_env = dict(os.environ, DYNALITE_STATE_DIR=os.path.join(workdir, "dynalite"))
    endpoint = subprocess.run([os.path.join(ROOT, "scripts", "dynalite.sh"), "start"], env=dynalite_env,
                              check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    try:
        subprocess.run([binary, "control", "create-tables", "--endpoint", endpoint], check=True,
                       capture_output=True, timeout=60)
        # The container's environment: the package's binary on PATH, the task's or pod's
        # variables, DynamoDB at dynalite in place of the region's endpoint, and no queue
        # (the manifests' --release-queue needs SQS: it is dropped here).
        base_env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": workdir, "AWS_EC2_METADATA_DISABLED": "true",
                    "AWS_ENDPOINT_URL_DYNAMODB": endpoint}
        ecs_env = dict(base_env, **{e["name"]: e["value"] for e in ecs["environment"]})
        # On loopback, at a free port in place of the manifests' (tests may run side by side).
        port = free_port()
        command = ecs["command"][0].replace(" --release-queue releases.fifo", "")
        command = command.replace(f"0.0.0.0:{ecs_port}", f"127.0.0.1:{port}")
        health = ecs["healthCheck"]["command"][1].replace(f":{ecs_port}/", f":{port}/")
        run_worker("ecs worker", ecs["entryPoint"] + [command], ecs_env, port, ecs_stop, health, workdir)

        pod_env = dict(base_env, POD_NAME="leaseproof-worker-0", **k8s_env)
        port = free_port()
        argv = [a.replace("$(POD_NAME)", pod_env["POD_NAME"]).replace(f"0.0.0.0:{k8s_port}", f"127.0.0.1:{port}")
                for a in k8s_argv]
        queue = argv.index("--release-queue")
        del argv[queue:queue + 2]
        run_worker("statefulset worker", [os.path.join(bin_dir, "leaseproof")] + argv, pod_env, port, k8s_grace,
                   None, workdir)
    finally:
        subprocess.run([os.path.join(ROOT, "scripts", "dynalite.sh"), "stop"], env=dynalite_env, timeout=30,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print("PASS deploy: the image's files and manifests agree, and their worker commands run from the package")


def main():
    return run_main("deploy", "deploy_test.py BUILD_DIR LEASEPROOF_BINARY", run)


if __name__ == "__main__":
    sys.exit(main())
