#!/usr/bin/env python3
"""Accepted parameters run bounded: a property test over `leaseproof run`.

Draws parameter objects for the lease scenarios (one to four fields each:
valid values, values at the edges of their ranges and just past them, some
absurd), runs each as its own process under a wall-time and memory limit, and
checks that the run either
  - is refused as bad input: exit 2, nothing run, and a message naming one of
    the fields it was given, or
  - finishes: exit 0 (PASS), 1 (FAIL) or 3 (INCONCLUSIVE) within
    BASE_S + (PER_CONNECTION_MINUTE_S x connections + PER_WORKER_MINUTE_S x
    workers) x simulated minutes + PER_MESSAGE_S x messages published of wall
    time, and within the memory limit.
A crash (an assertion, std::bad_alloc), a hang, or an exit 2 that names no
given field fails the test, with the command that reproduces it.

Deterministic: the draws come from --seed (default 20261203). Usage:
  params_fuzz.py LEASEPROOF [--cases N] [--seed S] [--jobs J]
"""
import argparse
import concurrent.futures
import json
import random
import resource
import subprocess
import sys
import time

BASE_S = 20.0
PER_CONNECTION_MINUTE_S = 0.02
PER_WORKER_MINUTE_S = 0.2  # 1,000 workers over 500 connections: 16 s for 2 minutes measured
PER_MESSAGE_S = 20e-6  # about 7.5 us a message measured (stream-steady), with room
MEMORY_BYTES = 3 << 30

DURATIONS = ["0s", "1ns", "1us", "1ms", "10ms", "100ms", "1s", "2s", "5s", "19s", "20s", "21s", "1m", "10m",
             "1h", "1000h", "9999999h", "-1s", "-1ns"]
INTEGERS = [-1, 0, 1, 2, 3, 7, 64, 700, 1000, 1001, 4096, 65536, 100000, 100001, 1 << 31, 1 << 40]
RATIOS = ["0", "1/1000", "1/20", "1/4", "1/2", "99/100", "1", "2", "1/0", "-1/2"]

TOP = {
    "workers": "int", "connections": "int", "lease": "dur", "heartbeat": "dur", "reconcile": "dur",
    "reconcile_jitter": "dur", "margin": "dur", "request_timeout": "dur", "capacity": "int",
    "watch_interval": "dur", "skew_max": "dur", "fast_worker_offset": "dur", "drift_ppm_max": "int",
    "latency": "dur", "jitter": "dur", "loss": "ratio", "sqs_wait": "dur", "crash_every": "dur",
    "restart_after": "dur", "stable_worker_ids": "bool", "throttle_partition_wcu_per_s": "int", "deploy_at": "dur", "autoscaler": "bool",
    "autoscale_target": "int", "heal_at": "dur", "expiry": ["wall", "counter"], "algorithm": ["core", "seed"],
    "pauses": "faults", "partitions": "faults", "holds": "faults", "hold_delay": "dur", "write_throttles": "faults",
    "late_notices": "bool", "clock_steps": "faults",
    "stops": "stops",
}
STREAM = {
    "enabled": "bool", "publish_interval": "dur", "message_bytes": "int", "publish_until": "dur",
    "relay_idle": "dur", "hub_down": "dur", "keep_ring": "bool", "ring_messages": "int", "ring_bytes": "int",
    "replay_messages": "int", "queue_bytes": "int", "ping_interval": "dur", "pong_timeout": "dur",
    "write_deadline": "dur", "reconnect_base": "dur", "reconnect_cap": "dur", "jitter": "bool",
    "record_batch": "int", "record_linger": "dur", "record_retry_base": "dur", "record_retry_cap": "dur",
    "hub_silence_timeout": "dur", "record_mode": ["transact", "put", "packed"], "pack_bytes": "int",
    "hub_crashes": "times",
    "mass_closes": "times", "cuts": "timed", "hub_slow": "timed",
}
SCENARIOS = ["lease-crash", "lease-swarm", "lease-steady", "stream-steady", "lease-scale", "lease-deploy"]


def value(rng, kind):
    if isinstance(kind, list):
        return rng.choice(kind + ["other"])
    if kind == "int":
        return rng.choice(INTEGERS)
    if kind == "dur":
        return rng.choice(DURATIONS)
    if kind == "ratio":
        return rng.choice(RATIOS)
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "faults":
        return [{"worker": rng.choice([0, 1, 2, 99]), "at": rng.choice(DURATIONS), "length": rng.choice(DURATIONS)}
                for _ in range(rng.choice([0, 1, 3, 200]))]
    if kind == "stops":
        return [{"connection": rng.choice([0, 1, 499, 100000]), "at": rng.choice(DURATIONS)}
                for _ in range(rng.choice([0, 1, 3]))]
    if kind == "times":
        return [rng.choice(DURATIONS) for _ in range(rng.choice([0, 1, 3, 500]))]
    if kind == "timed":
        return [{"at": rng.choice(DURATIONS), "length": rng.choice(DURATIONS)} for _ in range(rng.choice([0, 1, 3]))]
    raise ValueError(kind)


def draw(rng):
    scenario = rng.choice(SCENARIOS)
    duration = rng.choice(["30s", "1m", "2m", "5m"])
    params = {}
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.3:
            name = rng.choice(sorted(STREAM))
            params.setdefault("stream", {})[name] = value(rng, STREAM[name])
        else:
            name = rng.choice(sorted(TOP))
            params[name] = value(rng, TOP[name])
    # Keep most runs small, so that the budget measures the parameters drawn.
    if "connections" not in params and rng.random() < 0.7:
        params["connections"] = 20
    if "workers" not in params and rng.random() < 0.7:
        params["workers"] = 3
    return scenario, duration, params


def fields_of(params):
    names = set()
    for key, value in params.items():
        names.add(key)
        if isinstance(value, dict):
            names.update(value)
    return names


def seconds(duration):
    """A duration as --duration and the drawn values spell them, in seconds."""
    units = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    for unit in ("ns", "us", "ms", "s", "m", "h"):
        if duration.endswith(unit) and duration[: -len(unit)].lstrip("-").isdigit():
            return float(duration[: -len(unit)]) * units[unit]
    return None


def messages(scenario, duration, params, connections):
    """Messages a run publishes, at most (0 without streaming)."""
    stream = params.get("stream") if isinstance(params.get("stream"), dict) else {}
    streaming = scenario in ("stream-steady", "lease-swarm") or stream.get("enabled") is True
    if not streaming:
        return 0
    interval = seconds(stream["publish_interval"]) if isinstance(stream.get("publish_interval"), str) else None
    interval = interval if interval and interval > 0 else 1.0
    return connections * seconds(duration) / max(interval, 1e-3)


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def check(binary, seed, scenario, duration, params):
    connections = params.get("connections", 500)
    connections = connections if isinstance(connections, int) and 0 <= connections <= 100000 else 500
    workers = params.get("workers", 10)
    workers = workers if isinstance(workers, int) and 0 <= workers <= 1000 else 10
    budget = (BASE_S + (PER_CONNECTION_MINUTE_S * max(connections, 1) + PER_WORKER_MINUTE_S * workers) *
              seconds(duration) / 60 + PER_MESSAGE_S * messages(scenario, duration, params, connections))
    command = [binary, "run", "--seed", str(seed), "--scenario", scenario, "--duration", duration,
               "--inline-checks", "--params", json.dumps(params, separators=(",", ":"))]
    shown = " ".join(command[:-1]) + " '" + command[-1] + "'"
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=budget, preexec_fn=limit_memory)
    except subprocess.TimeoutExpired:
        return f"still running after its budget of {budget:.0f} s: {shown}"
    elapsed = time.monotonic() - start
    if done.returncode == 2:
        message = done.stderr.strip().splitlines()[0] if done.stderr.strip() else ""
        if done.stdout.strip():
            return f"exit 2 after running something: {shown}"
        if not any(name in message for name in fields_of(params)):
            return f"exit 2 naming none of the fields given ({message!r}): {shown}"
        return None
    if done.returncode in (0, 1, 3):
        return None
    tail = (done.stderr.strip().splitlines() or [""])[-1]
    return f"exit {done.returncode} after {elapsed:.1f} s ({tail}): {shown}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261203)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    cases = [(case_seed, *draw(rng)) for case_seed in range(1, args.cases + 1)]
    failures = []
    refused = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(check, args.binary, *case) for case in cases]
        for index, future in enumerate(futures):
            problem = future.result()
            if problem:
                failures.append(problem)
                print(f"case {index + 1}: {problem}", flush=True)
    print(f"params_fuzz: {len(cases)} parameter objects, {len(failures)} failed (seed {args.seed})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
