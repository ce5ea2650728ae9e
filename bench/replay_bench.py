#!/usr/bin/env python3
"""Replay throughput and memory of runlens on a synthetic 1024-rank fleet.

Synthesizes Cap'n Proto recordings with `runlens synth` (cached in --dir), then
replays each through the default pipeline, alternating configurations run by
run so that machine noise hits them alike, and prints medians:

  /usr/bin/python3 bench/replay_bench.py                       # throughput, 1 and 2 threads
  /usr/bin/python3 bench/replay_bench.py --memory-steps 1000 2000 4000   # peak RSS vs run length
  /usr/bin/python3 bench/replay_bench.py --pipelines default default-without-store bench/core-pipeline.yaml
  /usr/bin/python3 bench/replay_bench.py --steps 500 --gpu-every 1 --threads 2 --bin OLD/runlens build/runlens --jsonl
      # issue 13's GPU-every-step mix, two builds side by side, from the recording and from JSONL

Events/s counts every event read from the recording (wall time of the whole
`runlens replay` process, start-up and exit included).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def synth(binary, path, ranks, steps, gpu_every=10):
    if os.path.exists(path):
        return
    subprocess.run([binary, "synth", "--ranks", str(ranks), "--steps", str(steps), "--gpu-every", str(gpu_every),
                    "--fault", "straggler:rank=713,from=%d" % (steps // 2), "--out", path],
                   check=True, stderr=subprocess.DEVNULL)


def count_events(binary, path):
    # `convert` reports the number of events it read.
    out = subprocess.run([binary, "convert", path, "-"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for word in out.stderr.split():
        if word.isdigit():
            return int(word)
    raise RuntimeError("cannot count events: " + out.stderr)


def without_store(dest):
    """pipelines/training-health.yaml less its `store` sink (the SQLite timeline
    sink): what the store costs, measured side by side with the default."""
    here = os.path.dirname(os.path.abspath(__file__))
    lines = open(os.path.join(here, "..", "pipelines", "training-health.yaml")).read().split("\n")
    out, skipping = [], False
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if line.strip() == "store:" and indent == 2:
            skipping = True
            continue
        if skipping and line.strip() and indent <= 2:
            skipping = False
        if not skipping:
            out.append(line)
    if len(out) == len(lines):
        raise RuntimeError("no `store:` sink found in pipelines/training-health.yaml")
    with open(dest, "w") as f:
        f.write("\n".join(out))
    return dest


def replay_once(binary, path, threads, outdir, pipeline=None):
    here = os.path.dirname(os.path.abspath(__file__))
    args = [binary, "replay", path, "--quiet", "--threads", str(threads), "--out", outdir,
            "--set", "RUNLENS_PUBLISH=ipc://" + outdir + "/pub",
            "--set", "RUNLENS_RULES=" + os.path.join(here, "..", "configs", "rules")]
    if pipeline:
        args += ["--pipeline", pipeline]
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if status != 0:
        raise RuntimeError("replay failed: " + " ".join(args))
    return elapsed, usage.ru_maxrss  # KiB on Linux


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", nargs="+", default=["build/runlens"],
                    help="runlens binaries to compare side by side (the first synthesizes the files)")
    ap.add_argument("--dir", default="/tmp/runlens-bench")
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--gpu-every", type=int, default=10, help="synth --gpu-every: steps between GPU and node samples")
    ap.add_argument("--jsonl", action="store_true", help="also replay the run as JSONL (synth's own output)")
    ap.add_argument("--memory-steps", type=int, nargs="*", default=[])
    ap.add_argument("--pipelines", nargs="+", default=["default"],
                    help="pipeline files to compare side by side; 'default' is the embedded default pipeline, "
                         "'default-without-store' the same less its SQLite store sink")
    a = ap.parse_args()
    binaries, a.bin = a.bin, a.bin[0]
    os.makedirs(a.dir, exist_ok=True)
    outdir = os.path.join(a.dir, "out")
    os.makedirs(outdir, exist_ok=True)

    if a.memory_steps:
        print("peak RSS vs run length (%d ranks, %d threads, median of %d)" % (a.ranks, max(a.threads), a.repeat))
        paths = {}
        for steps in a.memory_steps:
            paths[steps] = os.path.join(a.dir, "fleet-%dx%d-g%d.rlrec" % (a.ranks, steps, a.gpu_every))
            synth(a.bin, paths[steps], a.ranks, steps, a.gpu_every)
        rss = {s: [] for s in a.memory_steps}
        for _ in range(a.repeat):
            for steps in a.memory_steps:
                rss[steps].append(replay_once(a.bin, paths[steps], max(a.threads), outdir)[1])
        for steps in a.memory_steps:
            size = os.path.getsize(paths[steps]) / 2**20
            print("  steps %6d  recording %7.0f MiB  peak RSS %6.0f MiB" % (steps, size, statistics.median(rss[steps]) / 1024))
        return

    a.pipelines = [without_store(os.path.join(a.dir, "default-without-store.yaml")) if p == "default-without-store"
                   else p for p in a.pipelines]
    path = os.path.join(a.dir, "fleet-%dx%d-g%d.rlrec" % (a.ranks, a.steps, a.gpu_every))
    synth(a.bin, path, a.ranks, a.steps, a.gpu_every)
    inputs = [path]
    if a.jsonl:
        inputs.append(path[: -len(".rlrec")] + ".jsonl")
        synth(a.bin, inputs[-1], a.ranks, a.steps, a.gpu_every)
    events = count_events(a.bin, path)
    for f in inputs:
        print("input: %s, %d events, %.0f MiB" % (f, events, os.path.getsize(f) / 2**20))
    configs = [(b, f, p, t) for f in inputs for p in a.pipelines for t in a.threads for b in binaries]
    runs = {c: [] for c in configs}
    # Each build replays into a store of its own: builds of different schema
    # versions cannot share one (an older build refuses a newer store).
    outdirs = {b: outdir if len(binaries) == 1 else "%s-%d" % (outdir, i) for i, b in enumerate(binaries)}
    for d in outdirs.values():
        os.makedirs(d, exist_ok=True)
    for _ in range(a.repeat):
        for b, f, p, t in configs:
            runs[(b, f, p, t)].append(replay_once(b, f, t, outdirs[b], None if p == "default" else p))
    base = None
    for b, f, p, t in configs:
        secs = statistics.median(r[0] for r in runs[(b, f, p, t)])
        rss = statistics.median(r[1] for r in runs[(b, f, p, t)]) / 1024
        rate = events / secs
        base = base or rate
        label = "%s %s" % (f.rsplit(".", 1)[1], os.path.basename(p))
        if len(binaries) > 1:
            label = b + " " + label
        print("  %-40s threads %d: median %.3f s  %.2f M events/s  (x%.2f)  peak RSS %.0f MiB"
              % (label, t, secs, rate / 1e6, rate / base, rss))

if __name__ == "__main__":
    sys.exit(main())
