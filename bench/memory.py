#!/usr/bin/env python3
"""Peak RSS of `runlens replay` against run length and fleet size (issue 13).

Issue 13's target: memory flat in steps (peak RSS at 8,000 steps within 10 %
of 500 steps) and linear in live ranks, on the GPU-every-step mix:

  runlens synth --ranks R --steps S --gpu-every 1 --fault straggler:rank=R*7/10,from=S/2 --out F

For each (ranks, steps) of --steps (at --ranks-for-steps ranks) and of --ranks
(at --steps-for-ranks steps) this makes the recording (synth writes it
directly; cached in --dir while the script runs, deleted at the end unless
--keep), optionally its JSONL twin (--jsonl, for the runs of at most
--jsonl-max-steps steps: a 1024 x 8000 JSONL file is about 5 GB), and replays
each through the default pipeline into a fresh --out directory, alternating
configurations run by run, --repeat times, reading the peak RSS of each whole
process (wait4's ru_maxrss: the same figure as /usr/bin/time -v's "Maximum
resident set size"). Modes: `recording` (runlens replay F.rlrec --out DIR),
`store` (the same with --store sqlite:///DIR/x.db), `jsonl` (runlens replay
F.jsonl --out DIR). Prints medians, the ratio of each step count to the
first, and the slope in ranks (MiB per 1000 ranks more than the next smaller
fleet):

  /usr/bin/python3 bench/memory.py                      # 1024 ranks x 500, 2000, 8000 steps; 128, 512, 1024 ranks x 500
  /usr/bin/python3 bench/memory.py --threads 1 2 --modes recording store --repeat 3
  /usr/bin/python3 bench/memory.py --steps 500 2000 --ranks --jsonl --modes recording jsonl
  /usr/bin/python3 bench/memory.py --bin OLD/runlens NEW/runlens --steps 500 8000 --ranks --threads 1 2 --repeat 5
      # two builds, alternating run by run (the first --bin makes the recordings)
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def synth(binary, path, ranks, steps):
    if os.path.exists(path):
        return
    tmp = path + ".part" + os.path.splitext(path)[1]
    subprocess.run([binary, "synth", "--ranks", str(ranks), "--steps", str(steps), "--gpu-every", "1",
                    "--fault", "straggler:rank=%d,from=%d" % (ranks * 7 // 10, steps // 2), "--out", tmp],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.rename(tmp, path)


def replay(binary, path, threads, mode, scratch):
    out = tempfile.mkdtemp(dir=scratch)
    here = os.path.dirname(os.path.abspath(__file__))
    args = [binary, "replay", path, "--quiet", "--no-progress", "--threads", str(threads), "--out", out,
            "--set", "RUNLENS_PUBLISH=ipc://" + out + "/pub",
            "--set", "RUNLENS_RULES=" + os.path.join(here, "..", "configs", "rules")]
    if mode == "store":
        args += ["--store", "sqlite://" + os.path.join(out, "x.db")]
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    if status != 0:
        raise RuntimeError("replay failed (%d): %s" % (status, " ".join(args)))
    return elapsed, usage.ru_maxrss / 1024.0  # MiB (ru_maxrss is KiB on Linux)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", nargs="+", default=[os.path.join(os.environ.get("RUNLENS_BUILD_DIR", "build"), "runlens")],
                    help="runlens binaries, run alternately (the first makes the recordings)")
    ap.add_argument("--dir", default="/tmp/runlens-memory", help="where the recordings are made")
    ap.add_argument("--keep", action="store_true", help="keep the recordings (they are large)")
    ap.add_argument("--ranks-for-steps", type=int, default=1024)
    ap.add_argument("--steps", type=int, nargs="*", default=[500, 2000, 8000])
    ap.add_argument("--steps-for-ranks", type=int, default=500)
    ap.add_argument("--ranks", type=int, nargs="*", default=[128, 512, 1024])
    ap.add_argument("--threads", type=int, nargs="+", default=[2])
    ap.add_argument("--modes", nargs="+", default=["recording"], choices=["recording", "store", "jsonl"])
    ap.add_argument("--jsonl", action="store_true", help="also make the JSONL files (needed by --modes jsonl)")
    ap.add_argument("--jsonl-max-steps", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if "jsonl" in a.modes and not a.jsonl:
        sys.exit("--modes jsonl needs --jsonl")
    os.makedirs(a.dir, exist_ok=True)
    shapes = [(a.ranks_for_steps, s) for s in a.steps] + [(r, a.steps_for_ranks) for r in a.ranks]
    shapes = sorted(set(shapes), key=lambda rs: (rs[0] != a.ranks_for_steps, rs[0], rs[1]))
    files = {}
    made = []
    for ranks, steps in shapes:
        base = os.path.join(a.dir, "gpu1-%dx%d" % (ranks, steps))
        files[(ranks, steps, "rlrec")] = base + ".rlrec"
        if a.jsonl and steps <= a.jsonl_max_steps:
            files[(ranks, steps, "jsonl")] = base + ".jsonl"
    scratch = tempfile.mkdtemp(prefix="runlens-memory-out-")
    try:
        for path in files.values():
            if not os.path.exists(path):
                made.append(path)
        for (ranks, steps, ext), path in files.items():
            synth(a.bin[0], path, ranks, steps)
        configs = []
        for ranks, steps in shapes:
            for mode in a.modes:
                ext = "jsonl" if mode == "jsonl" else "rlrec"
                if (ranks, steps, ext) not in files:
                    continue
                for t in a.threads:
                    for b in a.bin:
                        configs.append((ranks, steps, mode, t, b))
        runs = {c: [] for c in configs}
        for _ in range(a.repeat):
            for c in configs:
                ranks, steps, mode, t, b = c
                ext = "jsonl" if mode == "jsonl" else "rlrec"
                runs[c].append(replay(b, files[(ranks, steps, ext)], t, mode, scratch))
        print("peak RSS of `runlens replay` (default pipeline), GPU samples every step, median of %d" % a.repeat)
        print("| binary | ranks | steps | input | mode | threads | wall | peak RSS | vs %d steps | MiB per 1000 ranks more |"
              % min(a.steps or [0]))
        print("|---|---|---|---|---|---|---|---|---|---|")
        for c in configs:
            ranks, steps, mode, t, b = c
            ext = "jsonl" if mode == "jsonl" else "rlrec"
            rss = statistics.median(r[1] for r in runs[c])
            wall = statistics.median(r[0] for r in runs[c])
            first = (ranks, min(a.steps), mode, t, b) if a.steps else None
            ratio = ""
            if ranks == a.ranks_for_steps and first in runs:
                ratio = "%.3f" % (rss / statistics.median(r[1] for r in runs[first]))
            # Linear in ranks: the slope from the next smaller fleet at the same steps.
            slope = ""
            smaller = [r for r in a.ranks if r < ranks and (r, steps, mode, t, b) in runs]
            if steps == a.steps_for_ranks and smaller:
                r0 = max(smaller)
                rss0 = statistics.median(r[1] for r in runs[(r0, steps, mode, t, b)])
                slope = "%.0f (from %d)" % ((rss - rss0) * 1000 / (ranks - r0), r0)
            size = os.path.getsize(files[(ranks, steps, ext)]) / 2**20
            print("| %s | %d | %d | %s %.0f MiB | %s | %d | %.2f s | %.0f MiB | %s | %s |"
                  % (b, ranks, steps, ext, size, mode, t, wall, rss, ratio, slope))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if not a.keep:
            for path in made:
                if os.path.exists(path):
                    os.remove(path)


if __name__ == "__main__":
    main()
