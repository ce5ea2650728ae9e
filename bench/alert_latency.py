#!/usr/bin/env python3
"""How soon an alert follows its evidence, live (issue 12; docs/performance.md).

Starts `runlens run` (the default pipeline) on loopback ports chosen now, a
subscriber on its alert stream (ZeroMQ SUB, in this process), and SDK emitters
for --ranks ranks multiplexed into at most --procs worker processes (so that 2
cores measure runlens, not the scheduler). The ranks step every --period-ms,
in lockstep on the wall clock, for --steps steps:

  * --slow ranks are stragglers in bursts: each is slow (3x its work time)
    for 4 steps, then well for 8, its phase staggered, so a straggler alert
    opens, re-arms and opens again many times per run;
  * rank 0 reports a NaN loss at the last step, and every rank then closes
    (run_end from rank 0), the way a diverging job ends (--close-after-ms:
    a moment later; a worker closes its emitters one after another, so its
    last one sends its final batch tens of milliseconds after its first).
    The worker processes then wait, idle, until the run's alerts are in:
    ranks exit on their own hosts, and 8 Python interpreters tearing down on
    the collector's 2 cores (measured: most of both cores for some 80 ms)
    would be timed as runlens's latency. --exit-at-close has them exit at
    once, for comparison.

Two figures per configuration, over --repeat runs:

  collector  from the arrival of the batch whose watermark completed an
             alert's evidence to its publication on the alert stream: the
             zmq_pub sink's latency histogram (`runlens run --counters-json`),
             every alert of the run;
  end to end from the SDK's emit of the tipping report (for a straggler: the
             last rank's report of the step the alert names; for nan_loss: the
             NaN's train event) to the subscriber's receipt, on one host and
             one clock. Alerts re-published as revisions are not counted again.
             Alerts tipped within 2 s of the last emitter's start are shown
             apart: while producers join, the collector holds their promises
             at the wall clock less join_grace (500 ms; docs/pipelines.md).
             So are the alerts the job's end tips (nan_loss, and stragglers
             at the last step): what completes their evidence is the ranks'
             final batches, so they are measured from the start of the last
             rank's close (its final batch goes then); the NaN also from its
             emit.

and the CPU the collector and the emitter processes use while the ranks step
(a share of one core; the machine has two).

  PYTHONPATH=build/python /usr/bin/python3 bench/alert_latency.py --ranks 64 1024 --flush-ms 50 10 --repeat 3

--alert-stream-inputs context,nan runs the shipped pipeline with its alert
stream fed by those nodes only (the symptom alerts without the diagnoses):
which inputs the stream's publications wait for.
"""
import argparse
import json
import math
import os
import pathlib
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time


from overload_recording import free_port
from procs import Subscriber

REPO = pathlib.Path(__file__).resolve().parent.parent
SLOW_ON, SLOW_OFF = 4, 8
JOIN_WINDOW_NS = 2_000_000_000  # runtime/executor.h kJoinWindow  # a slow rank's burst: slow steps, then well steps


def is_slow(rank, step, slow_ranks):
    """Whether `rank` is slow at `step`: slow ranks 1..slow, in staggered bursts."""
    if not 1 <= rank <= slow_ranks:
        return False
    phase = (step + 3 * rank) % (SLOW_ON + SLOW_OFF)
    return step >= 10 and phase < SLOW_ON


# --- worker: the emitters of a range of ranks ------------------------------------------------


def worker(args):
    import runlens

    lo, hi = (int(x) for x in args.worker.split(":"))
    ems = {}
    for r in range(lo, hi):
        ems[r] = runlens.Emitter(args.endpoint, run_id=args.run_id, rank=r, world_size=args.world,
                                 node=f"node-{r // 8:04d}", gpu=r % 8, flush_interval_ms=args.flush_ms,
                                 close_timeout=5.0)
    ready = time.time_ns()  # every emitter of this process made: their producers join now
    emitted = {}  # step -> latest emit wall time (ns) of this process's reports of it
    nan_emit = None
    period = args.period_ms / 1000.0
    for step in range(args.steps):
        # Lockstep: step `step` ends at t0 + (step + 1) * period on every process.
        end = args.t0 + (step + 1) * period
        delay = end - time.time()
        if delay > 0:
            time.sleep(delay)
        for r, em in ems.items():
            slow = is_slow(r, step, args.slow)
            work = 240.0 if slow else 80.0
            em.emit("step", step=step, step_ms=work + 10.0, comm_ms=6.0, data_wait_ms=4.0, tokens=4096)
            last = step == args.steps - 1
            if r == 0:
                em.emit("train", step=step, loss=float("nan") if last else 2.0 - 0.001 * step, lr=1e-3,
                        grad_norm=0.5)
                if last:
                    nan_emit = time.time_ns()
        emitted[step] = time.time_ns()
    time.sleep(args.close_after_ms / 1000.0)
    closing = time.time_ns()
    last_close = closing
    for em in ems.values():
        last_close = time.time_ns()  # the last one's: its final batch goes now, then the context waits for the queues
        em.close(status="failed", reason="loss is NaN")
    with open(args.out + ".tmp", "w") as f:
        json.dump({"emitted": emitted, "nan_emit": nan_emit, "ready": ready, "closing": closing,
                   "last_close": last_close}, f)
    os.replace(args.out + ".tmp", args.out)  # whole, or not there
    if not args.exit_at_close:
        # Idle until the parent has its alerts (it closes our stdin): the ranks
        # of a real fleet exit on their own hosts, and 8 interpreters tearing
        # down on the collector's 2 cores are not runlens's latency.
        sys.stdin.read()


# --- the collector and the subscriber ---------------------------------------------------------


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None


class CpuShare:
    """The share of one core the collector and the emitter processes use between two wall-clock times."""

    def __init__(self, collector, workers, start, end):
        self.result = None
        self.thread = threading.Thread(target=self.measure, args=(collector, workers, start, end), daemon=True)
        self.thread.start()

    def measure(self, collector, workers, start, end):
        if end <= start:
            return
        time.sleep(max(0.0, start - time.time()))
        a = [cpu_seconds(collector)] + [cpu_seconds(w) for w in workers]
        t = time.time()
        time.sleep(max(0.0, end - t))
        b = [cpu_seconds(collector)] + [cpu_seconds(w) for w in workers]
        dt = time.time() - t
        if None in a or None in b:
            return
        self.result = {"collector": (b[0] - a[0]) / dt, "emitters": sum(b[1:]) / dt - sum(a[1:]) / dt}


def cut_alert_stream(inputs, out):
    """The shipped pipeline with its alert stream (the zmq_pub sink) fed only by `inputs` (comma-separated),
    written into `out`: which of its inputs hold its publications back."""
    text = (REPO / "pipelines" / "training-health.yaml").read_text()
    cut, n = re.subn(r"(\n  alert_stream:\n    type: zmq_pub\n    inputs: )\[[^\]]*\]", rf"\g<1>[{inputs}]", text)
    if n != 1:
        sys.exit("alert_latency: the shipped pipeline has no alert_stream sink to cut")
    path = os.path.join(out, "pipeline.yaml")
    with open(path, "w") as f:
        f.write(cut)
    return path


def one_run(args, ranks, flush_ms, tmp):
    listen, publish = free_port(), free_port()
    out = tempfile.mkdtemp(dir=tmp)
    counters = os.path.join(out, "counters.json")
    env = dict(os.environ)
    pipeline = []
    if args.alert_stream_inputs:
        pipeline = ["--pipeline", cut_alert_stream(args.alert_stream_inputs, out),
                    "--set", f"RUNLENS_RULES={REPO / 'configs' / 'rules'}"]
    collector = subprocess.Popen(
        [args.binary, "run", *pipeline, "--out", out, "--quiet", "--counters-json", counters, "--threads",
         str(args.threads), "--set", f"RUNLENS_LISTEN=tcp://127.0.0.1:{listen}",
         "--set", f"RUNLENS_PUBLISH=tcp://127.0.0.1:{publish}"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(out, "run.log"), "w"))
    workers = []
    sub = None
    try:
        sub = Subscriber(f"tcp://127.0.0.1:{publish}")
        time.sleep(1.0)  # the collector binds, the subscriber connects
        procs = min(args.procs, ranks)
        t0 = time.time() + 1.0 + 0.002 * ranks  # every emitter connected before the first step
        run_id = f"latency-{ranks}-{flush_ms:g}-{int(t0)}"
        for i in range(procs):
            lo, hi = ranks * i // procs, ranks * (i + 1) // procs
            path = os.path.join(out, f"worker-{i}.json")
            cmd = [sys.executable, __file__, "--worker", f"{lo}:{hi}", "--endpoint", f"tcp://127.0.0.1:{listen}",
                   "--run-id", run_id, "--world", str(ranks), "--steps", str(args.steps), "--period-ms",
                   str(args.period_ms), "--flush-ms", str(flush_ms), "--slow", str(args.slow), "--t0", repr(t0),
                   "--close-after-ms", str(args.close_after_ms),
                   "--out", path]
            if args.exit_at_close:
                cmd.append("--exit-at-close")
            workers.append((subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE), path))
        # CPU shares over the steps (from 1 s after the first to 1 s before the last).
        span = args.steps * args.period_ms / 1000
        share = CpuShare(collector.pid, [p.pid for p, _ in workers], t0 + 1.0, t0 + span - 1.0)
        # Every worker has closed its emitters once its figures are written.
        deadline = time.time() + args.steps * args.period_ms / 1000 + 120
        for p, path in workers:
            while not os.path.exists(path) and p.poll() is None and time.time() < deadline:
                time.sleep(0.005)
            if not os.path.exists(path):
                sys.exit(f"alert_latency: worker {path} exited ({p.poll()}) without its figures")
        # The NaN at the last step must arrive without waiting for the idle timeout (30 s).
        deadline = time.time() + 5.0
        while time.time() < deadline and not any(a["kind"] == "nan_loss" for _, a in sub.alerts):
            time.sleep(0.01)
        time.sleep(0.2)
    finally:
        for p, _ in workers:
            p.stdin.close()  # the workers exit now
        for p, _ in workers:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        collector.send_signal(signal.SIGINT)
        try:
            collector.wait(timeout=60)
        except subprocess.TimeoutExpired:
            collector.kill()
        if sub:
            sub.close()
    emitted, nan_emit, ready, last_close, close_ms = {}, None, 0, 0, 0.0
    for _, path in workers:
        with open(path) as f:
            w = json.load(f)
        ready = max(ready, w["ready"])
        for step, t in w["emitted"].items():
            emitted[int(step)] = max(emitted.get(int(step), 0), t)
        nan_emit = nan_emit or w["nan_emit"]
        last_close = max(last_close, w["last_close"])
        close_ms = max(close_ms, (w["last_close"] - w["closing"]) / 1e6)
    # While producers join (within JOIN_WINDOW of the last new one) the
    # collector caps their promises at the wall clock less join_grace
    # (docs/pipelines.md, "Event time"): those alerts are counted apart.
    joined = ready + JOIN_WINDOW_NS
    # The last step is completed by the ranks' final batches (their closes),
    # not by a heartbeat: its alerts and the NaN's are tipped by the last
    # close, and are counted apart, from it ("end").
    last = args.steps - 1
    e2e = {"straggler": [], "nan_loss": [], "joining": [], "end": []}
    seen = set()
    for received, a in sub.alerts:
        if a["alert_id"] in seen:
            continue  # a revision
        seen.add(a["alert_id"])
        if a["kind"] == "straggler" and a.get("step") == last:
            e2e["end"].append((received - last_close) / 1e6)
        elif a["kind"] == "straggler" and a.get("step") in emitted:
            ms = (received - emitted[a["step"]]) / 1e6
            e2e["straggler" if emitted[a["step"]] >= joined else "joining"].append(ms)
            if args.show_slower is not None and ms > args.show_slower:
                print(f"  slow: {ms:.1f} ms rank {a.get('rank')} step {a.get('step')} of {args.steps}: "
                      f"{a.get('summary')}", flush=True)
        elif a["kind"] == "nan_loss" and nan_emit:
            e2e["nan_loss"].append((received - nan_emit) / 1e6)
            e2e["end"].append((received - last_close) / 1e6)
    collector_latency = None
    with open(counters) if os.path.exists(counters) else open(os.devnull) as f:
        for line in f:
            node = json.loads(line)
            if node["type"] == "zmq_pub" and "latency_us" in node:
                collector_latency = node["latency_us"]
    kinds = {}
    for _, a in sub.alerts:
        kinds[a["kind"]] = kinds.get(a["kind"], 0) + 1
    share.thread.join()
    return {"e2e": e2e, "collector": collector_latency, "kinds": kinds, "cpu": share.result, "close_ms": close_ms}


def quantile(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(os.environ.get("RUNLENS_BUILD_DIR", "build"), "runlens"))
    ap.add_argument("--ranks", type=int, nargs="*", default=[64, 1024])
    ap.add_argument("--flush-ms", type=float, nargs="*", default=[50.0, 10.0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--period-ms", type=float, default=100.0)
    ap.add_argument("--slow", type=int, default=8, help="ranks that straggle in bursts")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--close-after-ms", type=float, default=0.0, metavar="MS",
                    help="the ranks close MS after their last step (default 0: at once, the NaN's job stopping); "
                         "each process closes its emitters one after another")
    ap.add_argument("--threads", type=int, default=2, help="`runlens run --threads`")
    ap.add_argument("--exit-at-close", action="store_true",
                    help="the emitter processes exit as soon as they have closed (by default they wait, idle, "
                         "until the alerts are in: their interpreters' exit would share the collector's cores)")
    ap.add_argument("--alert-stream-inputs", metavar="A,B",
                    help="run the shipped pipeline with its alert stream fed only by these nodes (e.g. context,nan)")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    ap.add_argument("--show-slower", type=float, metavar="MS", help="print each straggler alert slower than MS end to end")
    # worker mode
    ap.add_argument("--worker")
    ap.add_argument("--endpoint")
    ap.add_argument("--run-id")
    ap.add_argument("--world", type=int)
    ap.add_argument("--t0", type=float)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.worker:
        args.flush_ms = args.flush_ms[0] if isinstance(args.flush_ms, list) else args.flush_ms
        worker(args)
        return
    results = []
    with tempfile.TemporaryDirectory(prefix="runlens-latency-") as tmp:
        for ranks in args.ranks:
            for flush_ms in args.flush_ms:
                runs = [one_run(args, ranks, flush_ms, tmp) for _ in range(args.repeat)]
                strag = [x for r in runs for x in r["e2e"]["straggler"]]
                nan = [x for r in runs for x in r["e2e"]["nan_loss"]]
                joining = [x for r in runs for x in r["e2e"]["joining"]]
                end = [x for r in runs for x in r["e2e"]["end"]]
                coll = [r["collector"] for r in runs if r["collector"]]
                cpus = [r["cpu"] for r in runs if r["cpu"]]
                row = {
                    "ranks": ranks, "flush_ms": flush_ms, "runs": len(runs),
                    "collector_p50_ms": statistics.median(c["p50"] for c in coll) / 1000 if coll else None,
                    "collector_p99_ms": statistics.median(c["p99"] for c in coll) / 1000 if coll else None,
                    "collector_max_ms": max(c["max"] for c in coll) / 1000 if coll else None,
                    "collector_alerts": sum(c["count"] for c in coll),
                    "straggler_n": len(strag), "straggler_p50_ms": quantile(strag, 0.5),
                    "straggler_p99_ms": quantile(strag, 0.99), "straggler_max_ms": max(strag, default=float("nan")),
                    "joining_n": len(joining), "joining_p50_ms": quantile(joining, 0.5),
                    "joining_max_ms": max(joining, default=float("nan")),
                    "nan_n": len(nan), "nan_runs_missing": sum(1 for r in runs if not r["e2e"]["nan_loss"]),
                    "nan_p50_ms": quantile(nan, 0.5), "nan_max_ms": max(nan, default=float("nan")),
                    "end_n": len(end), "end_p50_ms": quantile(end, 0.5), "end_max_ms": max(end, default=float("nan")),
                    "close_ms": statistics.median(r["close_ms"] for r in runs),
                    "kinds": runs[-1]["kinds"],
                    "cpu_collector": statistics.median(c["collector"] for c in cpus) if cpus else None,
                    "cpu_emitters": statistics.median(c["emitters"] for c in cpus) if cpus else None,
                }
                results.append(row)
                print(f"{ranks:5d} ranks, flush_interval {flush_ms:g} ms, {len(runs)} runs:")
                if coll:
                    print(f"  collector (batch arrival -> published): p50 {row['collector_p50_ms']:.3f} ms, "
                          f"p99 {row['collector_p99_ms']:.3f} ms, max {row['collector_max_ms']:.3f} ms "
                          f"(medians over runs; {row['collector_alerts']} alerts)")
                print(f"  end to end, straggler ({len(strag)} alerts): p50 {row['straggler_p50_ms']:.1f} ms, "
                      f"p99 {row['straggler_p99_ms']:.1f} ms, max {row['straggler_max_ms']:.1f} ms")
                print(f"  end to end, straggler while producers join ({len(joining)} alerts, within 2 s of the last "
                      f"emitter made): p50 {row['joining_p50_ms']:.1f} ms, max {row['joining_max_ms']:.1f} ms")
                print(f"  end to end, nan_loss at the last step, from its emit ({len(nan)} of {len(runs)} runs): "
                      f"p50 {row['nan_p50_ms']:.1f} ms, max {row['nan_max_ms']:.1f} ms")
                print(f"  at the job's end (nan_loss and the last step's stragglers, {len(end)} alerts), from the last "
                      f"rank's close: p50 {row['end_p50_ms']:.1f} ms, max {row['end_max_ms']:.1f} ms (the last close of "
                      f"a process began {row['close_ms']:.1f} ms after its first, median over runs of the slowest)")
                if cpus:
                    print(f"  CPU while stepping (share of one core, median): collector {row['cpu_collector']:.0%}, "
                          f"the {min(args.procs, ranks)} emitter processes {row['cpu_emitters']:.0%}")
                print(f"  alerts of the last run by kind: {row['kinds']}", flush=True)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
