#!/usr/bin/python3
"""Where a replay's CPU goes, by thread and symbol, and how builds compare there.

Each round replays FILE once per build (alternating, `runlens replay FILE
--out DIR --quiet`) under `perf record -F HZ` (Debian's linux-perf), and
counts the samples of each thread and of each function. A sample is 1/HZ s
of CPU, so counts are printed as ms per replay: medians over the rounds.

    bench/symbol_time.py --file g.rlrec --runlens new=build/runlens --repeat 6
        the thread classes (main: the executor's thread, which runs the
        operators at --threads 1; t1, t2...: the others, busiest first) and
        the functions above --min-ms on each
    bench/symbol_time.py --file g.rlrec --runlens old=OLD/runlens --runlens new=build/runlens \\
        --repeat 16 --symbol AsofJoin::process --symbol decode_batch
        the chosen functions (substrings of the symbol, any thread), build
        against build, with each round's ratio to the first build

On a shared, noisy machine a function's samples vary less between runs than
a whole replay's wall clock, and a change that touches some functions can be
told from the noise by the others (a function the change does not touch is
a control). docs/performance.md quotes figures made with it.
"""
import argparse
import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def profile(runlens, path, hz, workdir):
    """One replay under perf: {(thread class, symbol): samples}, {thread class: samples}."""
    out = os.path.join(workdir, "out")
    data = os.path.join(workdir, "perf.data")
    shutil.rmtree(out, ignore_errors=True)
    rec = subprocess.run(["perf", "record", "-q", "-F", str(hz), "-o", data, runlens, "replay", path, "--out", out,
                          "--quiet"], capture_output=True, text=True)
    if rec.returncode != 0:
        sys.exit("perf record %s replay %s failed (%d):\n%s" % (runlens, path, rec.returncode, rec.stderr[-2000:]))
    script = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,ip,sym,dso"], capture_output=True,
                            text=True, check=True).stdout
    samples = []  # (tid, is main, symbol)
    per_tid = collections.Counter()
    for line in script.splitlines():
        fields = line.split(None, 2)
        if len(fields) < 3 or "/" not in fields[0]:
            continue
        pid, tid = fields[0].split("/")
        symbol, _, dso = fields[2].rpartition(" (")
        if not symbol or symbol.startswith("[unknown]"):
            symbol = "[%s]" % os.path.basename(dso.rstrip(")"))
        samples.append((tid, tid == pid, symbol))
        per_tid[tid] += 1
    main_tids = {tid for tid, main, _ in samples if main}
    names = {}
    others = 0
    for tid, _ in per_tid.most_common():
        if tid in main_tids:
            names[tid] = "main"
        else:
            others += 1
            names[tid] = "t%d" % others
    by_symbol = collections.Counter()
    by_thread = collections.Counter()
    for tid, _, symbol in samples:
        by_symbol[(names[tid], symbol)] += 1
        by_thread[names[tid]] += 1
    return by_symbol, by_thread


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", required=True, help="a JSONL file or recording to replay")
    ap.add_argument("--runlens", action="append", required=True, metavar="NAME=PATH",
                    help="a build's runlens binary (repeatable; the first is the base of the ratios)")
    ap.add_argument("--repeat", type=int, default=6, help="rounds (medians of them)")
    ap.add_argument("--hz", type=int, default=4999, help="perf's sampling frequency")
    ap.add_argument("--symbol", action="append", default=[], help="a function to compare (substring; repeatable)")
    ap.add_argument("--min-ms", type=float, default=2.0, help="without --symbol: the functions listed")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        sys.exit("perf is not installed (apt-get install linux-perf)")
    builds = []
    for spec in args.runlens:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = os.path.basename(spec), spec
        builds.append((name, path))
    ms = 1000.0 / args.hz
    symbols = {name: collections.defaultdict(list) for name, _ in builds}
    threads = {name: collections.defaultdict(list) for name, _ in builds}
    with tempfile.TemporaryDirectory(prefix="symbol-time-") as workdir:
        for _ in range(args.repeat):
            for name, path in builds:
                by_symbol, by_thread = profile(path, args.file, args.hz, workdir)
                for thread, n in by_thread.items():
                    threads[name][thread].append(n * ms)
                if args.symbol:
                    for want in args.symbol:
                        symbols[name][want].append(ms * sum(n for (_, s), n in by_symbol.items() if want in s))
                else:
                    for key, n in by_symbol.items():
                        symbols[name][key].append(n * ms)
    for name, _ in builds:
        print("== %s: %s" % (name, ", ".join("%s %.1f ms" % (t, statistics.median(v))
                                             for t, v in sorted(threads[name].items(), key=lambda kv: -sum(kv[1])))))
        if args.symbol:
            for want in args.symbol:
                print("   %8.1f ms  %s" % (statistics.median(symbols[name][want]), want))
            continue
        for thread in sorted(threads[name], key=lambda t: -sum(threads[name][t])):
            rows = [(sum(v) / args.repeat, s) for (t, s), v in symbols[name].items() if t == thread]
            for mean, symbol in sorted(rows, reverse=True):
                if mean < args.min_ms:
                    break
                print("   %-4s %8.1f ms  %s" % (thread, mean, symbol[:110]))
    if args.symbol and len(builds) > 1:
        base = builds[0][0]
        for name, _ in builds[1:]:
            for want in args.symbol:
                ratios = sorted(a / b for a, b in zip(symbols[name][want], symbols[base][want]) if b > 0)
                if ratios:
                    print("%s / %s  %-28s median of the rounds' ratios %.2f [%s]" %
                          (name, base, want, statistics.median(ratios), " ".join("%.2f" % r for r in ratios)))


if __name__ == "__main__":
    main()
