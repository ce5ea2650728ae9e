#!/usr/bin/env python3
"""Latency of the portal's API calls on a large store (issue 16's benchmark; not in CI).

    /usr/bin/python3 bench/portal_api.py [--runlens build/runlens] [--store PATH] [--build-only]
        [--runs-64 90] [--runs-1024 10] [--steps 2000] [--jobs 2] [-n 50] [--json FILE]

Without --store, or with a --store PATH that does not exist yet, builds the
store first: RUNS_64 synthetic runs of 64 ranks and RUNS_1024 of 1024 ranks,
STEPS steps each, made by `runlens synth` with a fault from a rotating list
(straggler, thermal, nan, lr_change, host_cpu, slow_shard, network, xid, ...),
distinct run, job, experiment and model ids, and replayed into one SQLite
store (`runlens replay FILE --store sqlite://PATH --out DIR`), JOBS replays at
a time. It prints the build's wall time and writes PATH.manifest.json (the
runs, their faults) next to the store; a later run with --store PATH reuses
both.

Then starts `runlens serve --port 0 --store sqlite://PATH` and issues every
portal page's API calls N times each, sequentially from one keep-alive
client, over a mix of 64- and 1024-rank runs (alternating), and prints
p50/p99/max per call and whether p99 < 100 ms. A call whose route the server
does not have yet ("no such route") is reported as missing, not as an error;
any other non-200 answer is an error (the benchmark exits 1).
"""

from __future__ import annotations

import argparse
import http.client
import json
import pathlib
import subprocess
import sys
import tempfile
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

from procs import stop, wait_for

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_STORE = pathlib.Path("/work/wt/portal-store/portal.db")

EXPERIMENTS = [f"exp-{name}" for name in ("lr", "data", "scale", "opt", "ctx", "moe", "tok", "warm", "mix", "dist")]
MODELS = ["llama-x-7b", "llama-x-13b", "llama-x-70b", "mist-8b", "qwen-x-14b"]


def fault_for(i: int, ranks: int, steps: int) -> tuple[str, str, int | None, int]:
    """The i-th run's fault: (kind, synth --fault spec, faulty rank or None, first step)."""
    rank = (13 + 7 * i) % ranks
    at = steps // 4 + (i * 37) % (steps // 2)
    to = min(steps, at + steps // 8)
    table = [
        ("straggler", f"straggler:rank={rank},from={at},to={to},factor=1.7", rank),
        ("thermal", f"thermal:rank={rank},from={at},to={to}", rank),
        ("nan", f"nan:step={at}", None),
        ("lr_change", f"lr_change:step={at},factor=8", None),
        ("host_cpu", f"host_cpu:rank={rank},from={at},to={to}", rank),
        ("slow_shard", f"slow_shard:rank={rank},from={at},to={to}", rank),
        ("network", f"network:from={at},to={to},rank={rank}", rank),
        ("xid", f"xid:rank={rank},step={at}", rank),
        ("power_cap", f"power_cap:rank={rank},from={at},to={to}", rank),
        ("clock_low", f"clock_low:rank={rank},from={at},to={to}", rank),
        ("config_slowdown", f"config_slowdown:step={at}", None),
        ("oom", f"oom:rank={rank},step={at}", rank),
        ("slow_checkpoint", f"slow_checkpoint:from={at},to={to}", None),
        ("nvlink", f"nvlink:rank={rank},from={at},to={to}", rank),
    ]
    kind, spec, frank = table[i % len(table)]
    return kind, spec, frank, at


def plan(runs_64: int, runs_1024: int, steps: int) -> list[dict]:
    runs = []
    for i in range(runs_64 + runs_1024):
        big = i >= runs_64
        ranks = 1024 if big else 64
        kind, spec, frank, at = fault_for(i, ranks, steps)
        run_id = f"bench-{ranks}r-{i:03d}-{kind.replace('_', '-')}"
        runs.append({
            "runId": run_id, "ranks": ranks, "steps": steps, "fault": kind, "spec": spec, "rank": frank,
            "faultStep": at, "experimentId": EXPERIMENTS[i % len(EXPERIMENTS)], "modelId": MODELS[i % len(MODELS)],
            "modelVersion": f"v{100 + i}", "jobId": f"job-{i:03d}", "seed": 5000 + 31 * i,
            "config": [f"lr={3e-4 * (1 + i % 3):.1e}", f"global_batch={512 * (1 + i % 2)}"],
        })
    return runs


def build_store(a, store: pathlib.Path, runs: list[dict]) -> float:
    store.parent.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="runlens-portal-bench-", dir=store.parent))
    url = f"sqlite://{store}"

    def one(run: dict) -> float:
        t0 = time.monotonic()
        rec = work / f"{run['runId']}.rlrec"
        synth = [a.runlens, "synth", "--out", str(rec), "--run-id", run["runId"], "--ranks", str(run["ranks"]),
                 "--steps", str(run["steps"]), "--seed", str(run["seed"]), "--fault", run["spec"],
                 "--experiment-id", run["experimentId"], "--job-id", run["jobId"], "--model-id", run["modelId"],
                 "--model-version", run["modelVersion"], "--node-prefix", node_prefix(run)]
        for kv in run["config"]:
            synth += ["--config", kv]
        if run["fault"] == "oom":
            synth += ["--end-status", "failed", "--end-reason", "CUDA out of memory"]
        subprocess.run(synth, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        out = work / f"{run['runId']}.out"
        r = subprocess.run([a.runlens, "replay", str(rec), "--store", url, "--out", str(out), "--threads", "1",
                            "--quiet", "--set", "RUNLENS_PUBLISH=tcp://127.0.0.1:*"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"replay of {run['runId']} exited {r.returncode}: {r.stderr[-2000:]}")
        rec.unlink()
        subprocess.run(["rm", "-rf", str(out)])
        return time.monotonic() - t0

    t0 = time.monotonic()
    # The 1024-rank runs first, so that the two slots stay busy to the end.
    order = sorted(runs, key=lambda r: -r["ranks"])
    done = 0
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for run, dt in zip(order, pool.map(one, order)):
            done += 1
            print(f"  [{done}/{len(runs)}] {run['runId']}: {dt:.1f} s", flush=True)
    elapsed = time.monotonic() - t0
    subprocess.run(["rm", "-rf", str(work)])
    return elapsed


class Client:
    """One keep-alive HTTP connection."""

    def __init__(self, port: int):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def get(self, path: str) -> tuple[int, bytes, float]:
        for attempt in (0, 1):
            try:
                t0 = time.perf_counter()
                self.conn.request("GET", path)
                r = self.conn.getresponse()
                body = r.read()
                return r.status, body, (time.perf_counter() - t0) * 1000
            except (http.client.HTTPException, ConnectionError):
                if attempt:
                    raise
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        raise AssertionError("unreachable")


def node_prefix(run: dict) -> str:
    """Each run on its own nodes, as concurrent jobs on a fleet: GPU and node samples name a node, not a run."""
    return f"{run['runId']}-node-"


def q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def calls(pick64: list[dict], pick1024: list[dict], all_runs: list[dict]) -> list[tuple[str, str, object]]:
    """(page, call label, function run -> path); each call alternates over the picked 64- and 1024-rank runs."""

    def mid(r):
        return r["faultStep"]

    return [
        ("Runs", "/v1/runs?limit=100", lambda r: "/v1/runs?limit=100"),
        ("Runs", "/v1/runs?experiment=E&limit=100", lambda r: f"/v1/runs?experiment={q(r['experimentId'])}&limit=100"),
        ("Runs", "/v1/runs?model=M&status=completed", lambda r: f"/v1/runs?model={q(r['modelId'])}&status=completed"),
        ("Runs", "/v1/runs?q=SUBSTR", lambda r: f"/v1/runs?q={q(r['runId'][-8:])}"),
        ("Runs", "/v1/runs?since=NS", lambda r: "/v1/runs?since=1&limit=100"),
        ("Search", "/v1/search?q=RUN", lambda r: f"/v1/search?q={q(r['runId'])}"),
        ("Search", "/v1/search?q=NODE", lambda r: f"/v1/search?q={q(node_prefix(r))}1"),
        ("Run", "/v1/runs/ID", lambda r: f"/v1/runs/{q(r['runId'])}"),
        ("Run", "/v1/runs/ID/steps?maxPoints=1000", lambda r: f"/v1/runs/{q(r['runId'])}/steps?maxPoints=1000"),
        ("Run", "/v1/runs/ID/steps?limit=1000", lambda r: f"/v1/runs/{q(r['runId'])}/steps?limit=1000"),
        ("Run", "/v1/runs/ID/timeline", lambda r: f"/v1/runs/{q(r['runId'])}/timeline"),
        ("Run", "/v1/runs/ID/gpus", lambda r: f"/v1/runs/{q(r['runId'])}/gpus"),
        ("Run", "/v1/alerts?runId=ID", lambda r: f"/v1/alerts?runId={q(r['runId'])}"),
        ("Failure", "/v1/runs/ID/report", lambda r: f"/v1/runs/{q(r['runId'])}/report"),
        ("Ranks", "/v1/runs/ID/heatmap", lambda r: f"/v1/runs/{q(r['runId'])}/heatmap"),
        ("Ranks", "/v1/runs/ID/ranks?limit=100", lambda r: f"/v1/runs/{q(r['runId'])}/ranks?limit=100"),
        ("Ranks", "/v1/runs/ID/ranks?sort=ratio&order=desc&limit=2000",
         lambda r: f"/v1/runs/{q(r['runId'])}/ranks?sort=ratio&order=desc&limit=2000"),
        ("Ranks", "/v1/runs/ID/ranks/R", lambda r: f"/v1/runs/{q(r['runId'])}/ranks/{r['rank'] or 0}"),
        ("Timeline", "/v1/runs/ID/timeline?fromStep&toStep",
         lambda r: f"/v1/runs/{q(r['runId'])}/timeline?fromStep={max(1, mid(r) - 50)}&toStep={mid(r) + 150}"),
        ("Timeline", "/v1/runs/ID/steps?fromStep&toStep",
         lambda r: f"/v1/runs/{q(r['runId'])}/steps?fromStep={max(1, mid(r) - 50)}&toStep={mid(r) + 150}&maxPoints=400"),
        ("Compare", "/v1/runs/compare?left&right", lambda r: f"/v1/runs/compare?left={q(r['runId'])}&right={q(r['pair'])}"),
        ("Lineage", "/v1/lineage/RUN", lambda r: f"/v1/lineage/{q(r['runId'])}"),
        ("Lineage", "/v1/lineage/EXPERIMENT", lambda r: f"/v1/lineage/{q(r['experimentId'])}"),
        ("Lineage", "/v1/lineage/NODE", lambda r: f"/v1/lineage/{q(node_prefix(r))}1"),
    ]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100 * len(xs) + 0.5)) - 1))
    return xs[k]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runlens", default=str(ROOT / "build" / "runlens"))
    p.add_argument("--store", type=pathlib.Path, default=DEFAULT_STORE,
                   help=f"the SQLite store to query (built first when absent; default {DEFAULT_STORE})")
    p.add_argument("--build-only", action="store_true", help="build the store and stop")
    p.add_argument("--runs-64", type=int, default=90)
    p.add_argument("--runs-1024", type=int, default=10)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--jobs", type=int, default=2, help="replays at a time while building")
    p.add_argument("-n", type=int, default=50, help="times each call is issued")
    p.add_argument("--json", type=pathlib.Path, help="also write the results as JSON here")
    a = p.parse_args()
    if not pathlib.Path(a.runlens).exists():
        sys.exit(f"portal_api: no runlens binary at {a.runlens}")

    store = a.store.resolve()
    manifest = store.with_name(store.name + ".manifest.json")
    if store.exists():
        if not manifest.exists():
            sys.exit(f"portal_api: {store} has no {manifest.name} (build the store with this script)")
        info = json.loads(manifest.read_text())
        print(f"reusing {store} ({store.stat().st_size / 2**20:.0f} MiB; built in {info['buildSeconds']:.0f} s)")
    else:
        runs = plan(a.runs_64, a.runs_1024, a.steps)
        print(f"building {store}: {a.runs_64} runs of 64 ranks and {a.runs_1024} of 1024 ranks x {a.steps} steps, "
              f"{a.jobs} replays at a time", flush=True)
        try:
            elapsed = build_store(a, store, runs)
        except BaseException:
            for f in (store, store.with_name(store.name + "-wal"), store.with_name(store.name + "-shm")):
                f.unlink(missing_ok=True)
            raise
        info = {"buildSeconds": elapsed, "jobs": a.jobs, "runs": runs}
        manifest.write_text(json.dumps(info, indent=1))
        print(f"built {store} in {elapsed:.0f} s ({store.stat().st_size / 2**20:.0f} MiB)", flush=True)
    if a.build_only:
        return 0

    runs = info["runs"]
    # A mix: the thermal and straggler runs of each size, and a few others.
    small = [r for r in runs if r["ranks"] == 64]
    big = [r for r in runs if r["ranks"] == 1024]
    pick64 = [r for r in small if r["fault"] in ("thermal", "straggler", "nan", "xid")][:4] or small[:4]
    pick1024 = big[:4]
    for group in (pick64, pick1024):
        for i, r in enumerate(group):
            r["pair"] = group[(i + 1) % len(group)]["runId"]
    mix = [x for pair in zip(pick64, pick1024) for x in pair] or (pick64 + pick1024)

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="runlens-portal-bench-serve-"))
    log = tmp / "serve.log"
    serve = subprocess.Popen([a.runlens, "serve", "--store", f"sqlite://{store}", "--port", "0"],
                             stdout=open(log, "w"), stderr=subprocess.STDOUT)
    results = []
    errors = 0
    try:
        port = int(wait_for(log, r"http://127\.0\.0\.1:(\d+)/", serve, 60, "portal_api").group(1))
        client = Client(port)
        print(f"{a.n} calls each, alternating over {len(mix)} runs "
              f"({', '.join(r['runId'] for r in mix)}), one keep-alive client\n", flush=True)
        head = f"{'page':<9} {'call':<52} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'KiB':>7}  p99<100"
        print(head)
        print("-" * len(head))
        for page, label, path_of in calls(pick64, pick1024, runs):
            status, body, _ = client.get(path_of(mix[0]))  # warm-up, and the route check
            if (status == 404 and b"no such route" in body) or (status == 400 and b"unknown parameter" in body):
                what = "route" if status == 404 else "parameter"
                print(f"{page:<9} {label:<52} {'missing':>8}  ({what} not in this build)")
                results.append({"page": page, "call": label, "missing": what})
                continue
            times, sizes, bad = [], [], None
            for i in range(a.n):
                run = mix[i % len(mix)]
                path = path_of(run)
                status, body, ms = client.get(path)
                if status != 200:
                    bad = f"{path}: {status} {body[:300].decode(errors='replace')}"
                    break
                times.append(ms)
                sizes.append(len(body))
            if bad:
                errors += 1
                print(f"{page:<9} {label:<52} {'error':>8}  {bad}")
                results.append({"page": page, "call": label, "error": bad})
                continue
            p50, p99, mx = pct(times, 50), pct(times, 99), max(times)
            kib = max(sizes) / 1024
            print(f"{page:<9} {label:<52} {p50:8.1f} {p99:8.1f} {mx:8.1f} {kib:7.0f}  {'yes' if p99 < 100 else 'NO'}",
                  flush=True)
            results.append({"page": page, "call": label, "p50Ms": p50, "p99Ms": p99, "maxMs": mx, "maxKiB": kib})
    finally:
        stop(serve)
        subprocess.run(["rm", "-rf", str(tmp)])
    timed = [r for r in results if "p99Ms" in r]
    slow = [r["call"] for r in timed if r["p99Ms"] >= 100]
    missing = [r["call"] for r in results if r.get("missing")]
    print(f"\n{len(timed)} calls timed, {len(slow)} with p99 >= 100 ms, {len(missing)} missing, {errors} errors")
    if a.json:
        a.json.write_text(json.dumps({"store": str(store), "n": a.n, "results": results}, indent=1))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
