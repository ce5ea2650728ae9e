#!/usr/bin/env python3
"""Checks each peer's answers against runlens's per-step aggregates.

  /usr/bin/python3 bench/peers/check_agree.py --file g.jsonl [--runlens build/runlens]
      [--peers clickhouse,pandas] [--answers clickhouse=a.json] [--tolerance 1e-9]

Replays FILE through the default pipeline (`runlens replay FILE --store
sqlite:///DIR/store.db --out DIR`) and reads its step_stats table: per step the
straggler_ratio (slowest rank's work / the lower median's) and slowest_rank
that the store and GET /v1/runs/{id}/steps hold (stragglerRatio, slowestRank),
and the steps whose loss is NaN (stored as the text 'NaN', store/sqlite); unless
--no-api, `runlens serve` on that store must serve the same through the API.
Each peer is run (or its answers read from --answers, as a peer's --answers wrote
them) and must give:

  - the same steps, each with the same slowest rank;
  - its ratio within the tolerance of runlens's: |a - b| <= tol * max(1, |b|)
    (relative, 1e-9 by default: the peers and runlens parse the same decimal
    texts, but ClickHouse 18.16's float parser is not always correctly rounded,
    so the last bits may differ; any real disagreement is far larger);
  - the same steps above the straggler detector's ratio_threshold (read from
    `runlens operators --markdown`, the straggler's table). A step whose ratio is
    within the tolerance of the threshold is borderline: printed, not a failure;
  - the same NaN steps.

Prints one line per peer; on a disagreement the first differences and exit 1.
"""
import argparse
import json
import os
import pathlib
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # bench/: procs

from procs import stop  # noqa: E402

MAX_SHOWN = 10


def straggler_threshold(runlens: str) -> float:
    """The straggler operator's default ratio_threshold, from its generated docs table."""
    out = subprocess.run([runlens, "operators", "--markdown"], check=True, capture_output=True, text=True).stdout
    section = out.split("### `straggler`", 1)
    if len(section) != 2:
        raise RuntimeError("`runlens operators --markdown` has no straggler section")
    m = re.search(r"^\| `ratio_threshold` \| number \| `([0-9.eE+-]+)` \|", section[1], re.M)
    if not m:
        raise RuntimeError("the straggler section names no ratio_threshold")
    return float(m.group(1))


def replay_command(runlens: str, path: str, outdir: str, extra=()):
    return [runlens, "replay", path, "--quiet", "--out", outdir, "--store", "sqlite://" + os.path.join(outdir,
                                                                                                    "store.db"),
            "--set", "RUNLENS_PUBLISH=ipc://" + os.path.join(outdir, "pub"),
            "--set", "RUNLENS_RULES=" + str(REPO / "configs" / "rules"), *extra]


def runlens_answers(runlens: str, path: str, outdir: str):
    """Replays `path` into outdir/store.db; its step_stats as peers' answers."""
    proc = subprocess.run(replay_command(runlens, path, outdir), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError("runlens replay failed (%d):\n%s" % (proc.returncode, proc.stderr[-4000:]))
    return stored_answers(os.path.join(outdir, "store.db"))


def stored_answers(store_path: str):
    """The step_stats of a store runlens wrote, as peers' answers."""
    db = sqlite3.connect("file:%s?mode=ro" % store_path, uri=True)
    try:
        rows = db.execute("SELECT run_id, step, straggler_ratio, slowest_rank, loss FROM step_stats "
                          "ORDER BY run_id, step").fetchall()
    finally:
        db.close()
    steps, nan_steps = {}, []
    for run_id, step, ratio, slowest, loss in rows:
        key = "%s/%d" % (run_id, step)
        steps[key] = [float(ratio), -1 if slowest is None else int(slowest)]
        if isinstance(loss, str) and loss == "NaN":
            nan_steps.append(key)
    return {"steps": steps, "nan_steps": nan_steps}


def api_answers(runlens: str, store_path: str, runs: dict):
    """The same aggregates as GET /v1/runs/{id}/steps serves them (stragglerRatio, slowestRank, loss "NaN"),
    from `runlens serve` on the store, on loopback ports chosen at run time, stopped by PID. runs: id -> steps."""
    log_path = store_path + ".serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([runlens, "serve", "--store", "sqlite://" + store_path, "--port", "0",
                                 "--workers", "tcp://127.0.0.1:0"], stdout=log, stderr=subprocess.STDOUT)
    try:
        base, deadline = None, time.monotonic() + 30
        while base is None:
            m = re.search(r"on (http://127\.0\.0\.1:\d+/v1)/", pathlib.Path(log_path).read_text(errors="replace"))
            if m:
                base = m.group(1)
            elif proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("runlens serve did not start:\n" + pathlib.Path(log_path).read_text())
            else:
                time.sleep(0.02)
        steps, nan_steps = {}, []
        for run_id in runs:
            url = "%s/runs/%s/steps?limit=%d" % (base, urllib.parse.quote(run_id, safe=""), runs[run_id] + 1)
            with urllib.request.urlopen(url, timeout=60) as resp:
                body = json.loads(resp.read())
            for st in body["steps"]:
                key = "%s/%d" % (run_id, st["step"])
                steps[key] = [float(st["stragglerRatio"]), -1 if st["slowestRank"] is None else st["slowestRank"]]
                if st["loss"] == "NaN":
                    nan_steps.append(key)
        return {"steps": steps, "nan_steps": nan_steps}
    finally:
        stop(proc, timeout=20)


def step_order(key: str):
    run_id, _, step = key.rpartition("/")
    return run_id, int(step)


def compare(reference, peer, threshold: float, tol: float):
    """Differences of `peer` from `reference` (runlens), first ones first: (differences, borderline steps)."""
    diffs, borderline = [], []
    ref_steps, peer_steps = reference["steps"], peer["steps"]
    for key in sorted(set(ref_steps) - set(peer_steps), key=step_order):
        diffs.append("step %s: runlens has it (ratio %.17g), the peer does not" % (key, ref_steps[key][0]))
    for key in sorted(set(peer_steps) - set(ref_steps), key=step_order):
        diffs.append("step %s: the peer has it (ratio %.17g), runlens does not" % (key, peer_steps[key][0]))
    for key in sorted(set(ref_steps) & set(peer_steps), key=step_order):
        (a, ra), (b, rb) = peer_steps[key], ref_steps[key]
        if ra != rb:
            diffs.append("step %s: slowest rank %d, runlens %d" % (key, ra, rb))
        if abs(a - b) > tol * max(1.0, abs(b)):
            diffs.append("step %s: ratio %.17g, runlens %.17g" % (key, a, b))
        if abs(b - threshold) <= tol * max(1.0, threshold) or abs(a - threshold) <= tol * max(1.0, threshold):
            borderline.append(key)
        elif (a > threshold) != (b > threshold):
            diffs.append("step %s: %s the threshold %g (ratio %.17g), runlens %s (%.17g)" %
                         (key, "above" if a > threshold else "not above", threshold, a,
                          "above" if b > threshold else "not above", b))
    ref_nan, peer_nan = set(reference["nan_steps"]), set(peer["nan_steps"])
    for key in sorted(ref_nan - peer_nan, key=step_order):
        diffs.append("step %s: NaN loss in runlens, not in the peer" % key)
    for key in sorted(peer_nan - ref_nan, key=step_order):
        diffs.append("step %s: NaN loss in the peer, not in runlens" % key)
    return diffs, borderline


def peer_answers(name: str, path: str):
    if name == "clickhouse":
        import clickhouse_peer
        with clickhouse_peer.ClickHouseServer() as server:
            return clickhouse_peer.run(path, server.port)[0]
    if name == "pandas":
        import pandas_peer
        return pandas_peer.run(path)[0]
    raise SystemExit("check_agree: unknown peer '%s' (clickhouse, pandas)" % name)


def above(answers, threshold):
    return sum(1 for ratio, _ in answers["steps"].values() if ratio > threshold)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", required=True, help="runlens JSONL telemetry")
    ap.add_argument("--runlens", default=str(REPO / "build" / "runlens"))
    ap.add_argument("--peers", default="clickhouse,pandas", help="comma-separated: clickhouse, pandas")
    ap.add_argument("--answers", action="append", default=[], metavar="PEER=FILE",
                    help="take PEER's answers from FILE (its --answers output) instead of running it")
    ap.add_argument("--tolerance", type=float, default=1e-9, help="relative tolerance of ratios")
    ap.add_argument("--threshold", type=float, help="ratio threshold (default: the straggler's ratio_threshold)")
    ap.add_argument("--no-api", action="store_true",
                    help="skip checking the store's step_stats against GET /v1/runs/{id}/steps (runlens serve)")
    ap.add_argument("--keep", help="replay into this directory (kept) instead of a temp dir")
    args = ap.parse_args(argv)
    given = {}
    for item in args.answers:
        name, sep, file = item.partition("=")
        if not sep:
            raise SystemExit("check_agree: --answers takes PEER=FILE, got '%s'" % item)
        given[name] = json.loads(pathlib.Path(file).read_text())
    peers = [p for p in args.peers.split(",") if p] + [p for p in given if p not in args.peers.split(",")]
    threshold = args.threshold if args.threshold is not None else straggler_threshold(args.runlens)
    with tempfile.TemporaryDirectory(prefix="runlens-agree-") as tmp:
        outdir = args.keep or tmp
        os.makedirs(outdir, exist_ok=True)
        reference = runlens_answers(args.runlens, args.file, outdir)
        failed = False
        api = ""
        if not args.no_api:
            runs = {}
            for key in reference["steps"]:
                runs[key.rpartition("/")[0]] = runs.get(key.rpartition("/")[0], 0) + 1
            served = api_answers(args.runlens, os.path.join(outdir, "store.db"), runs)
            diffs, _ = compare(reference, served, threshold, 0.0)
            if diffs:
                failed = True
                print("runlens: the store's step_stats and GET /v1/runs/{id}/steps DISAGREE; the first:")
                for d in diffs[:MAX_SHOWN]:
                    print("  " + d)
            else:
                api = " (the store's step_stats and GET /v1/runs/{id}/steps alike)"
    print("runlens: %d steps, %d above %g, %d NaN steps%s" % (len(reference["steps"]), above(reference, threshold),
                                                               threshold, len(reference["nan_steps"]), api))
    for name in peers:
        answers = given[name] if name in given else peer_answers(name, args.file)
        diffs, borderline = compare(reference, answers, threshold, args.tolerance)
        if diffs:
            failed = True
            print("%s: DISAGREES with runlens in %d places; the first:" % (name, len(diffs)))
            for d in diffs[:MAX_SHOWN]:
                print("  " + d)
        else:
            print("%s: agrees: %d steps, %d above %g, the same slowest ranks, %d NaN steps%s" %
                  (name, len(answers["steps"]), above(answers, threshold), threshold, len(answers["nan_steps"]),
                   " (borderline: %s)" % ", ".join(borderline) if borderline else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
