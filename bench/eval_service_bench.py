#!/usr/bin/env python3
"""Coordination throughput of the evaluation service (issue 10's benchmark).

    /usr/bin/python3 bench/eval_service_bench.py [--runlens build/runlens] [--items 1000000]
        [--partition 10000] [--workers 4] [--metrics light|heavy] [--repeat 3]

Starts `runlens serve` on a fresh SQLite store in a temp dir and WORKERS
processes of `runlens eval worker --runner instant` (they score every item at
once, with no model), then, REPEAT times, registers a new checkpoint and
submits one evaluation of ITEMS items: the service plans the shards,
schedules them, sends the assignments over ZeroMQ, validates and aggregates
each result, writes every item row, the shard metrics and statuses to the
store, and ends the evaluation COMPLETED. Each repetition uses a new model
version, so nothing comes from the cache. Prints, per repetition, the time
from the submission to COMPLETED and items/s, then the median, and the
service's peak RSS (VmHWM). Every process it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from procs import wait_for

ROOT = pathlib.Path(__file__).resolve().parent.parent

METRICS = {
    "light": "  - accuracy\n",
    "heavy": "  - accuracy\n  - perplexity\n  - bleu\n  - pass@k: {k: [1, 10]}\n",
}


def http(url: str, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def peak_rss_mib(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runlens", default=str(ROOT / "build" / "runlens"))
    p.add_argument("--items", type=int, default=1_000_000)
    p.add_argument("--partition", type=int, default=10_000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--slots", type=int, default=2, help="shards each worker holds at once")
    p.add_argument("--metrics", choices=sorted(METRICS), default="light")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="runlens-eval-bench-"))
    data = tmp / "items.txt"
    data.write_bytes(b"".join(b"%d\n" % i for i in range(a.items)))
    data_hash = hashlib.sha256(data.read_bytes()).hexdigest()
    suite = tmp / "bench.yaml"
    suite.write_text(
        "suite: bench-instant-v1\nbenchmark: bench-instant\nversion: \"1\"\nevaluator: runlens-eval-instant-v1\n"
        f"dataset:\n  id: bench-items\n  version: \"1\"\n  sha256: {data_hash}\n  path: {data}\n  items: {a.items}\n"
        "prompt:\n  template: \"{x}\"\n  version: v1\n"
        f"metrics:\n{METRICS[a.metrics]}"
        f"decoding: {{temperature: 0}}\npartition_size: {a.partition}\npriority: P2\nmax_attempts: 3\n"
        "workers: {pool: cpu, memory: 64MiB}\n")
    store = f"sqlite://{tmp / 'bench.db'}"
    procs: list[subprocess.Popen] = []

    def start(name, args):
        log = tmp / f"{name}.log"
        proc = subprocess.Popen([a.runlens, *args], stdout=open(log, "w"), stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc, log

    try:
        serve, serve_log = start("serve", ["serve", "--store", store, "--create", "--port", "0", "--workers", "tcp://127.0.0.1:0",
                                           "--suites", str(suite)])
        api = "http://127.0.0.1:" + wait_for(serve_log, r"on http://127\.0\.0\.1:(\d+)/v1/", serve, 30, "eval_service_bench").group(1)
        endpoint = wait_for(serve_log, r"workers connect to (tcp://\S+)", serve, 30, "eval_service_bench").group(1)
        for i in range(a.workers):
            start(f"worker-{i}", ["eval", "worker", "--runner", "instant", "--connect", endpoint, "--id", f"bench-w{i}",
                                  "--slots", str(a.slots), "--memory", "1GiB"])
        deadline = time.monotonic() + 30
        while len(http(f"{api}/v1/workers")["workers"]) < a.workers:
            if time.monotonic() > deadline:
                sys.exit("eval_service_bench: the workers did not all register")
            time.sleep(0.05)

        print(f"{a.items} items, partition {a.partition} ({-(-a.items // a.partition)} shards), {a.workers} instant "
              f"workers x {a.slots} slots, metrics {a.metrics}", flush=True)
        rates = []
        for r in range(a.repeat):
            ck = hashlib.sha256(f"bench-checkpoint-{r}".encode()).hexdigest()
            version = f"bench-model:r{r}"
            http(f"{api}/v1/checkpoints", {"checkpointId": f"bench-ck-{r}", "sha256": ck, "uri": f"file:///bench/{r}",
                                           "modelVersion": version})
            t0 = time.monotonic()
            ev = http(f"{api}/v1/evaluations", {"modelVersion": version, "checkpointId": f"bench-ck-{r}",
                                                "benchmarkSuite": "bench-instant-v1"})["evaluationId"]
            while True:
                st = http(f"{api}/v1/evaluations/{ev}")
                if st["status"] not in ("QUEUED", "RUNNING"):
                    break
                time.sleep(0.01)
            dt = time.monotonic() - t0
            if st["status"] != "COMPLETED":
                sys.exit(f"eval_service_bench: {ev} ended {st['status']}: {json.dumps(st)[:2000]}")
            rates.append(a.items / dt)
            print(f"  run {r + 1}: {dt:.2f} s, {a.items / dt:,.0f} items/s", flush=True)
        print(f"median {statistics.median(rates):,.0f} items/s; service peak RSS {peak_rss_mib(serve.pid):.0f} MiB",
              flush=True)
        return 0
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in reversed(procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if os.environ.get("RUNLENS_BENCH_KEEP") != "1":
            subprocess.run(["rm", "-rf", str(tmp)])


if __name__ == "__main__":
    sys.exit(main())
