#!/usr/bin/python3
"""The sharded-gate manifests, run as written (CTest gate_shard_manifests).

deploy/gate-shards.github.yml (a GitHub Actions matrix) and
deploy/gate-shards.k8s.yaml (a Kubernetes Indexed Job) each run `leaseproof
gate --shard i/n` once per shard and merge the shards' gate.json with
`leaseproof report merge`. This test reads both files, runs each shard's
command exactly as the manifest writes it (the matrix value or
JOB_COMPLETION_INDEX filled in as the engine would, the manifests' SEEDS
variable set lower so that it stays short, and in a scratch directory whose
tests/gate/regressions.jsonl holds the first entries of the project's), runs
the merge command, and checks that each merged gate.json equals the one an
unsharded gate writes, and that the merge's exit status is the gate's.

usage: manifests_test.py LEASEPROOF_BINARY [--seeds N] [--regressions K]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT_S = 600  # one command; the whole test runs about 30 s in Release


def fail(message):
    print(f"manifests_test: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def run(command, cwd, env, shell=False):
    """Runs one manifest command; returns its exit status."""
    shown = command if shell else " ".join(command)
    print(f"$ {shown}", flush=True)
    done = subprocess.run(["bash", "-c", command] if shell else command, cwd=cwd, env=env, timeout=TIMEOUT_S,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in done.stdout.splitlines():
        if line.startswith(("gate:", "report merge:", "leaseproof:")) or "FAIL" in line:
            print(f"  {line}")
    if done.returncode not in (0, 1):
        print(done.stdout, file=sys.stderr)
        fail(f"exit status {done.returncode} from: {shown}")
    return done.returncode


def load(path):
    with open(path) as source:
        return json.load(source)


def github(directory, env):
    with open(os.path.join(ROOT, "deploy", "gate-shards.github.yml")) as source:
        workflow = yaml.safe_load(source)
    env = dict(env)
    for name, value in workflow["env"].items():
        env.setdefault(name, str(value))
    jobs = workflow["jobs"]
    shards = jobs["gate"]["strategy"]["matrix"]["shard"]
    if str(len(shards)) != env["SHARDS"]:
        fail(f"github: matrix.shard has {len(shards)} values, SHARDS says {env['SHARDS']}")
    step = next(s for s in jobs["gate"]["steps"] if s.get("name") == "gate shard")["run"]
    statuses = []
    for shard in shards:
        command = step.replace("${{ matrix.shard }}", str(shard))
        if "${{" in command:
            fail(f"github: an expression the test does not fill in: {command}")
        statuses.append(run(command, directory, env, shell=True))
    merge = next(s for s in jobs["merge"]["steps"] if s.get("name") == "merge")["run"]
    merged_status = run(merge, directory, env, shell=True)
    # The same gate, unsharded: the shard's command without --shard.
    unsharded = re.sub(r'--shard "[^"]*"', "", step).replace('"gate-shard-${{ matrix.shard }}"', "gate-unsharded")
    if "--shard" in unsharded or "${{" in unsharded:
        fail(f"github: could not derive the unsharded command from: {step}")
    unsharded_status = run(unsharded, directory, env, shell=True)
    return statuses, merged_status, os.path.join(directory, "gate-merged", "gate.json"), unsharded_status, \
        os.path.join(directory, "gate-unsharded", "gate.json")


def expand(text, env):
    """Kubernetes' $(VAR) references in command and args."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), text)


def kubernetes(directory, env, seeds):
    with open(os.path.join(ROOT, "deploy", "gate-shards.k8s.yaml")) as source:
        documents = list(yaml.safe_load_all(source))
    claims = [d["metadata"]["name"] for d in documents if d["kind"] == "PersistentVolumeClaim"]
    jobs = [d for d in documents if d["kind"] == "Job"]
    if len(jobs) != 2:
        fail(f"kubernetes: expected the gate Job and the merge Job, found {len(jobs)} Jobs")
    gate_job, merge_job = jobs
    # The results volume is defined in the file, and both Jobs mount it.
    for job in jobs:
        for volume in job["spec"]["template"]["spec"]["volumes"]:
            claim = volume.get("persistentVolumeClaim", {}).get("claimName")
            if claim not in claims:
                fail(f"kubernetes: {job['metadata']['name']} mounts claim {claim!r}, which the file does not "
                     f"define (claims: {claims})")
    # Each run writes its own folder, named by RUN in both Jobs.
    runs = [{v["name"]: v["value"] for v in j["spec"]["template"]["spec"]["containers"][0].get("env", [])}.get("RUN")
            for j in jobs]
    if runs[0] is None or runs[0] != runs[1]:
        fail(f"kubernetes: the Jobs' RUN values differ or are missing: {runs}")
    spec = gate_job["spec"]
    if spec.get("completionMode") != "Indexed":
        fail("kubernetes: the gate Job is not an Indexed Job")
    container = spec["template"]["spec"]["containers"][0]
    statuses = []
    for index in range(spec["completions"]):
        pod_env = dict(env)
        for variable in container.get("env", []):
            pod_env[variable["name"]] = str(variable["value"])
        pod_env["SEEDS"] = str(seeds)
        pod_env["JOB_COMPLETION_INDEX"] = str(index)  # what the Job controller sets
        command = [expand(part, pod_env) for part in container["command"] + container["args"]]
        if "index/" + str(spec["completions"]) not in command:
            fail(f"kubernetes: --shard is not index/{spec['completions']}: {command}")
        statuses.append(run(command, directory, pod_env))
    merge = merge_job["spec"]["template"]["spec"]["containers"][0]
    if merge["command"] != ["sh", "-c"]:
        fail(f"kubernetes: the merge Job's command is not sh -c: {merge['command']}")
    merge_env = dict(env, **{v["name"]: str(v["value"]) for v in merge.get("env", [])})
    merged_status = run(expand(merge["args"][0], merge_env), directory, merge_env, shell=True)
    return statuses, merged_status, os.path.join(directory, "results", runs[0], "merged", "gate.json")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binary")
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--regressions", type=int, default=3, help="entries of tests/gate/regressions.jsonl kept")
    options = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="leaseproof-manifests-")
    try:
        # The scratch directory stands for the checkout (GitHub) and the image's /work (Kubernetes).
        os.makedirs(os.path.join(directory, "tests", "gate"))
        os.makedirs(os.path.join(directory, "bin"))
        kept = 0
        with open(os.path.join(ROOT, "tests", "gate", "regressions.jsonl")) as source, \
                open(os.path.join(directory, "tests", "gate", "regressions.jsonl"), "w") as out:
            for line in source:
                if line.startswith("{") and kept < options.regressions:
                    out.write(line)
                    kept += 1
        shutil.copy(os.path.abspath(options.binary), os.path.join(directory, "leaseproof"))  # the downloaded artifact
        os.symlink(os.path.abspath(options.binary), os.path.join(directory, "bin", "leaseproof"))  # the image's PATH
        env = dict(os.environ)
        env["PATH"] = os.path.join(directory, "bin") + os.pathsep + env["PATH"]
        env["SEEDS"] = str(options.seeds)

        statuses, merged_status, merged, unsharded_status, unsharded = github(directory, env)
        expected = load(unsharded)
        runs = len(expected["runs"])
        if runs != options.seeds + kept:
            fail(f"the unsharded gate ran {runs} runs, expected {options.seeds} seeds + {kept} regressions")
        if load(merged) != expected:
            fail(f"github: {merged} differs from the unsharded {unsharded}")
        if merged_status != unsharded_status:
            fail(f"github: the merge exits {merged_status}, the unsharded gate {unsharded_status}")
        print(f"github: {len(statuses)} shards (exit {statuses}) merged = unsharded ({runs} runs, exit {merged_status})")

        statuses, merged_status, merged = kubernetes(directory, env, options.seeds)
        if load(merged) != expected:
            fail(f"kubernetes: {merged} differs from the unsharded {unsharded}")
        if merged_status != unsharded_status:
            fail(f"kubernetes: the merge exits {merged_status}, the unsharded gate {unsharded_status}")
        print(f"kubernetes: {len(statuses)} shards (exit {statuses}) merged = unsharded ({runs} runs, exit {merged_status})")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print("manifests_test: PASS")


if __name__ == "__main__":
    main()
