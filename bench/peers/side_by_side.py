#!/usr/bin/env python3
"""runlens side by side with its peers (ClickHouse, pandas) on the same file.

  /usr/bin/python3 bench/peers/side_by_side.py --make --repeat 5            # the issue's two files
  /usr/bin/python3 bench/peers/side_by_side.py --file g.jsonl --repeat 5 --recording
  /usr/bin/python3 bench/peers/side_by_side.py --file g.jsonl --recording --runlens build-release/runlens --compare build/runlens

Each round runs, one after the other on the same file: `runlens replay FILE`
through the default pipeline (wall time of the process, start-up and exit
included; peak RSS from wait4), with --recording also `runlens replay
FILE.rlrec` (made once by `runlens convert`), the ClickHouse peer (split, load
and both queries, against one server started for the whole benchmark) and the
pandas peer (read and compute, in a process of its own; the import of pandas
is not counted). Prints each run, whether the last round's peer answers agree
with the store of the last JSONL replay (check_agree.compare), the medians and
the ratios runlens / ClickHouse and runlens / pandas, and one JSON line of the
medians per file. --compare BIN runs a second runlens binary in the same
rounds (first in every other round), with its own medians and ratios and the
median of the rounds' ratios runlens / BIN: the release build against the
plain one, or a change against main, on the same minutes as the peers.

--make writes the issue's two files into --dir (kept: made once):
  g.jsonl     runlens synth --ranks 1024 --steps 500 --gpu-every 1 --fault straggler:rank=713,from=250
  rich.jsonl  the same with --detail-every 1 (collective and data-loader samples of every rank and step)
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import check_agree  # noqa: E402
import clickhouse_peer  # noqa: E402

ISSUE_FILES = {
    "g.jsonl": ["--ranks", "1024", "--steps", "500", "--gpu-every", "1", "--fault", "straggler:rank=713,from=250"],
    "rich.jsonl": ["--ranks", "1024", "--steps", "500", "--gpu-every", "1", "--detail-every", "1", "--fault",
                   "straggler:rank=713,from=250"],
}


def make_files(runlens, directory):
    os.makedirs(directory, exist_ok=True)
    paths = []
    for name, flags in ISSUE_FILES.items():
        path = os.path.join(directory, name)
        cmd = [runlens, "synth", *flags, "--out", path]
        if not os.path.exists(path):
            print("making: " + " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
        paths.append(path)
    return paths


def count_lines(path):
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            n += chunk.count(b"\n")
    return n


def replay(runlens, path, workdir, tag="replay"):
    """One `runlens replay` of `path` into a fresh dir workdir/tag: (seconds, peak RSS in MiB, dead letters)."""
    outdir = os.path.join(workdir, tag)
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    cmd = check_agree.replay_command(runlens, path, outdir)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError("runlens replay failed (%d): %s\n%s" % (proc.returncode, " ".join(cmd), err[-3000:]))
    dead = 0
    for name in os.listdir(outdir):
        if name.startswith("dead_letter"):
            dead += count_lines(os.path.join(outdir, name))
    return elapsed, usage.ru_maxrss / 1024, dead


def pandas_run(path, answers):
    proc = subprocess.run([sys.executable, str(HERE / "pandas_peer.py"), "--file", path, "--answers", answers],
                          check=True, capture_output=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def server_peak_rss_mib(pid):
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def bench_file(args, path, server, workdir):
    events = count_lines(path)
    size_mb = os.path.getsize(path) / 1e6
    print("\n== %s: %d events, %.0f MB" % (path, events, size_mb), flush=True)
    recording = None
    if args.recording:
        recording = os.path.join(workdir, pathlib.Path(path).stem + ".rlrec")
        subprocess.run([args.runlens, "convert", path, recording], check=True, capture_output=True)
    count_lines(path)  # the page cache holds the file before the first round, for every contender alike
    runs = {"runlens": [], "runlens_rec": [], "compare": [], "compare_rec": [], "clickhouse": [], "pandas": []}
    rss = {"runlens": [], "runlens_rec": [], "compare": [], "compare_rec": []}
    dead = 0
    ch_parts, pd_rss = [], []
    for i in range(args.repeat):
        parts = {}

        def contender(key, binary, tag):
            s, mib, d = replay(binary, path, workdir, tag)
            runs[key].append(s)
            rss[key].append(mib)
            parts[key] = "%.2f s (%.0f MiB, %d dead letters)" % (s, mib, d)
            if recording:
                s, mib, _ = replay(binary, recording, workdir, tag + "-recording")
                runs[key + "_rec"].append(s)
                rss[key + "_rec"].append(mib)
                parts[key] += ", from recording %.2f s (%.0f MiB)" % (s, mib)
            return d

        order = [("runlens", args.runlens, "replay"), ("compare", args.compare, "replay-compare")]
        if not args.compare:
            order = order[:1]
        elif i % 2:
            order.reverse()  # neither binary always runs first
        for key, binary, tag in order:
            d = contender(key, binary, tag)
            if key == "runlens":
                dead += d
        line = "round %d: runlens %s" % (i + 1, parts["runlens"])
        if args.compare:
            line += "; compare %s" % parts["compare"]
        ch_answers, ch = clickhouse_peer.run(path, server.port)
        runs["clickhouse"].append(ch["total_s"])
        ch_parts.append(ch)
        line += ", clickhouse %.2f s (split+load %.2f, queries %.3f)" % (
            ch["total_s"], ch["split_load_s"], ch["straggler_query_s"] + ch["nan_query_s"])
        pd_answers = os.path.join(workdir, "pandas-answers.json")
        pd_ = pandas_run(path, pd_answers)
        runs["pandas"].append(pd_["total_s"])
        pd_rss.append(pd_["peak_rss_mib"])
        line += ", pandas %.2f s (read %.2f, compute %.2f)" % (pd_["total_s"], pd_["read_s"], pd_["compute_s"])
        print(line, flush=True)
    # The last round's answers against the store of the last JSONL replay (check_agree's comparison).
    reference = check_agree.stored_answers(os.path.join(workdir, "replay", "store.db"))
    threshold = check_agree.straggler_threshold(args.runlens)
    agree = {}
    for name, answers in (("clickhouse", ch_answers), ("pandas", json.loads(pathlib.Path(pd_answers).read_text()))):
        diffs, _ = check_agree.compare(reference, answers, threshold, 1e-9)
        agree[name] = not diffs
        print("%s answers: %s" % (name, "agree with runlens's step_stats (%d steps, %d above %g, %d NaN)" % (
            len(reference["steps"]), check_agree.above(reference, threshold), threshold, len(reference["nan_steps"]))
            if not diffs else "DISAGREE: " + "; ".join(diffs[:5])))
    med = {k: statistics.median(v) for k, v in runs.items() if v}
    summary = {
        "file": path, "events": events, "mb": round(size_mb, 1), "repeat": args.repeat,
        "runlens_s": round(med["runlens"], 3), "runlens_events_per_s": round(events / med["runlens"]),
        "runlens_peak_rss_mib": round(statistics.median(rss["runlens"]), 1),
        "runlens_peak_rss_max_mib": round(max(rss["runlens"]), 1), "runlens_dead_letters": dead,
        "clickhouse_s": round(med["clickhouse"], 3),
        "clickhouse_split_load_s": round(statistics.median(c["split_load_s"] for c in ch_parts), 3),
        "clickhouse_queries_s": round(statistics.median(c["straggler_query_s"] + c["nan_query_s"]
                                                        for c in ch_parts), 3),
        "clickhouse_server_peak_rss_mib": round(server_peak_rss_mib(server.proc.pid) or 0, 1),
        "clickhouse_ping_ms": round(server.ping_s * 1000, 1),
        "pandas_s": round(med["pandas"], 3), "pandas_peak_rss_mib": round(statistics.median(pd_rss), 1),
        "peers_agree": agree,
        "runlens_over_clickhouse": round(med["runlens"] / med["clickhouse"], 2),
        "runlens_over_pandas": round(med["runlens"] / med["pandas"], 2),
    }
    if args.compare:
        summary["compare_binary"] = args.compare
        summary["compare_s"] = round(med["compare"], 3)
        summary["compare_peak_rss_mib"] = round(statistics.median(rss["compare"]), 1)
        summary["compare_over_clickhouse"] = round(med["compare"] / med["clickhouse"], 2)
        summary["runlens_over_compare_paired"] = round(
            statistics.median(a / b for a, b in zip(runs["runlens"], runs["compare"])), 3)
        if recording:
            summary["compare_recording_s"] = round(med["compare_rec"], 3)
            summary["compare_recording_over_clickhouse"] = round(med["compare_rec"] / med["clickhouse"], 2)
            summary["runlens_recording_over_compare_paired"] = round(
                statistics.median(a / b for a, b in zip(runs["runlens_rec"], runs["compare_rec"])), 3)
    if recording:
        summary["runlens_recording_s"] = round(med["runlens_rec"], 3)
        summary["runlens_recording_events_per_s"] = round(events / med["runlens_rec"])
        summary["runlens_recording_peak_rss_mib"] = round(statistics.median(rss["runlens_rec"]), 1)
        summary["runlens_recording_over_clickhouse"] = round(med["runlens_rec"] / med["clickhouse"], 2)
        summary["runlens_recording_over_pandas"] = round(med["runlens_rec"] / med["pandas"], 2)
    print("medians of %d: runlens %.2f s (%.0f k events/s, peak RSS %.0f MiB), clickhouse %.2f s, pandas %.2f s" % (
        args.repeat, med["runlens"], events / med["runlens"] / 1e3, summary["runlens_peak_rss_mib"],
        med["clickhouse"], med["pandas"]))
    if recording:
        print("  runlens from the recording %.2f s (%.0f k events/s, peak RSS %.0f MiB)" % (
            med["runlens_rec"], events / med["runlens_rec"] / 1e3, summary["runlens_recording_peak_rss_mib"]))
    print("ratios: runlens / clickhouse %.2f, runlens / pandas %.2f" % (summary["runlens_over_clickhouse"],
                                                                       summary["runlens_over_pandas"]))
    if args.compare:
        line = "compare (%s): %.2f s, / clickhouse %.2f; runlens / compare, median of the rounds' ratios, %.3f" % (
            args.compare, med["compare"], summary["compare_over_clickhouse"], summary["runlens_over_compare_paired"])
        if recording:
            line += "; from the recording %.2f s, / clickhouse %.2f, runlens / compare %.3f" % (
                med["compare_rec"], summary["compare_recording_over_clickhouse"],
                summary["runlens_recording_over_compare_paired"])
        print(line)
    print(json.dumps(summary), flush=True)
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", action="append", default=[], help="runlens JSONL telemetry (repeatable)")
    ap.add_argument("--runlens", default=str(REPO / "build" / "runlens"))
    ap.add_argument("--compare", help="a second runlens binary, run in the same rounds (see above)")
    ap.add_argument("--repeat", type=int, default=5, help="rounds (medians of them)")
    ap.add_argument("--make", action="store_true", help="make the issue's two files in --dir and run on them")
    ap.add_argument("--dir", default="/tmp/runlens-peers", help="where --make writes its files")
    ap.add_argument("--recording", action="store_true",
                    help="also replay a recording of each file made by `runlens convert`")
    args = ap.parse_args()
    files = list(args.file)
    if args.make:
        files += [p for p in make_files(args.runlens, args.dir) if p not in files]
    if not files:
        ap.error("give --file FILE or --make")
    print("machine: %d CPUs, load average %s" % (os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    print("runlens: %s%s" % (args.runlens, "; compare: " + args.compare if args.compare else ""))
    with tempfile.TemporaryDirectory(prefix="runlens-side-") as workdir, clickhouse_peer.ClickHouseServer() as server:
        print("clickhouse-server pid %d answered /ping after %.0f ms" % (server.proc.pid, server.ping_s * 1000))
        for path in files:
            bench_file(args, path, server, workdir)
    print("load average after: %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
