#!/usr/bin/env python3
"""Wall time of whole runlens processes, builds side by side.

Runs one command line with each binary in turn, --runs times, alternating
binaries run by run so that the machine's phases hit them alike, and prints
the median and quartiles of each binary's wall time (from spawning the
process to its exit: start-up and exit included). An argument that is OUT,
or starts with OUT/, names a fresh directory made for every run (and
removed after it):

  /usr/bin/python3 bench/command_wall.py --bin OLD/runlens build/runlens --runs 31 -- \\
      replay tiny.rlrec --out OUT --quiet
  /usr/bin/python3 bench/command_wall.py --bin OLD/runlens build/runlens -- convert tiny.jsonl OUT/t.rlrec

A run that exits non-zero stops the benchmark with its error.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", nargs="+", default=["build/runlens"], help="runlens binaries, run alternately")
    ap.add_argument("--runs", type=int, default=21, help="runs of each binary (default 21)")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- then the command's arguments (OUT: a fresh directory)")
    a = ap.parse_args()
    args = a.args[1:] if a.args[:1] == ["--"] else a.args
    if not args:
        ap.error("give the command's arguments after --")
    walls = {b: [] for b in a.bin}
    for _ in range(a.runs):
        for b in a.bin:
            d = tempfile.mkdtemp(prefix="runlens-wall-")
            try:
                out = os.path.join(d, "out")
                os.mkdir(out)
                argv = [b] + [out + x[3:] if x == "OUT" or x.startswith("OUT/") else x for x in args]
                t = time.perf_counter()
                r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                walls[b].append((time.perf_counter() - t) * 1000)
                if r.returncode != 0:
                    sys.exit("%s exited %d: %s" % (" ".join(argv), r.returncode, r.stderr.strip()[-500:]))
            finally:
                shutil.rmtree(d, ignore_errors=True)
    print("| binary | runs | median | q1 | q3 |")
    print("|---|---|---|---|---|")
    for b, v in walls.items():
        q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
        print("| %s | %d | %.1f ms | %.1f | %.1f |" % (b, len(v), statistics.median(v), q[0], q[2]))


if __name__ == "__main__":
    main()
