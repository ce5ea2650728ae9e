#!/usr/bin/env python3
"""The pandas peer: the script a user writes with Debian's python3-pandas.

  /usr/bin/python3 bench/peers/pandas_peer.py --file g.jsonl [--answers a.json]

Timed from the first byte read to the last answer (import of pandas not
counted): keep the step and train lines of the JSONL (a prefix test per line,
as grep would), parse each kind with pandas.read_json(lines=True), then per
step work = step_ms - comm_ms - data_wait_ms (at least 0), ratio = max / the
lower median (groupby quantile 0.5 with interpolation="lower": element (n-1)/2
of the sorted works, runlens's step_stats p50), the slowest rank (idxmax over
rows sorted by rank: the lowest rank among equal maxima), and the steps whose
loss is NaN. synth writes a NaN loss as the JSON string "NaN", which read_json
keeps as text in an object column: the NaN test is on that text, so a train row
without a loss (NaN in pandas too) does not count, as in runlens.
"""
import argparse
import io
import json
import pathlib
import resource
import sys
import time

import pandas as pd

STEP_PREFIX = b'{"type":"step"'
TRAIN_PREFIX = b'{"type":"train"'


def read_rows(path: str):
    steps, trains = [], []
    with open(path, "rb") as f:
        for line in f:
            if line.startswith(STEP_PREFIX):
                steps.append(line)
            elif line.startswith(TRAIN_PREFIX):
                trains.append(line)
    step_df = pd.read_json(io.BytesIO(b"".join(steps)), lines=True, dtype=False, convert_dates=False) if steps else None
    train_df = pd.read_json(io.BytesIO(b"".join(trains)), lines=True, dtype=False, convert_dates=False) if trains else None
    return step_df, train_df


def compute(step_df, train_df):
    steps, nan_steps = {}, []
    if step_df is not None:
        df = step_df[["run_id", "step", "rank", "step_ms", "comm_ms", "data_wait_ms"]].copy()
        for col in ("step_ms", "comm_ms", "data_wait_ms"):
            df[col] = pd.to_numeric(df[col])
        work = df["step_ms"] - df["comm_ms"].fillna(0) - df["data_wait_ms"].fillna(0)
        df["work"] = work.clip(lower=0)
        df = df.sort_values(["run_id", "step", "rank"], kind="stable").reset_index(drop=True)
        g = df.groupby(["run_id", "step"], sort=True)["work"]
        median = g.quantile(0.5, interpolation="lower")
        slowest = df.loc[g.idxmax(), ["run_id", "step", "rank", "work"]].set_index(["run_id", "step"])
        for (run_id, step), med in median.items():
            row = slowest.loc[(run_id, step)]
            ratio = float(row["work"]) / med if med > 0 else 0.0
            steps["%s/%d" % (run_id, step)] = [ratio, int(row["rank"])]
    if train_df is not None and "loss" in train_df:
        is_nan = train_df["loss"].map(lambda v: isinstance(v, str) and v in ("NaN", "nan"))
        nan = train_df.loc[is_nan, ["run_id", "step"]].drop_duplicates().sort_values(["run_id", "step"])
        nan_steps = ["%s/%d" % (r, s) for r, s in zip(nan["run_id"], nan["step"])]
    return {"steps": steps, "nan_steps": nan_steps}


def run(path: str):
    """Read and both computations: (answers, timings), answers as clickhouse_peer.run's."""
    t0 = time.perf_counter()
    step_df, train_df = read_rows(path)
    t1 = time.perf_counter()
    answers = compute(step_df, train_df)
    t2 = time.perf_counter()
    timings = {"peer": "pandas", "file": path, "rows_loaded": (0 if step_df is None else len(step_df)) +
               (0 if train_df is None else len(train_df)), "read_s": round(t1 - t0, 4),
               "compute_s": round(t2 - t1, 4), "total_s": round(t2 - t0, 4)}
    return answers, timings


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", required=True, help="runlens JSONL telemetry")
    ap.add_argument("--answers", help="write the per-step answers here (JSON), for check_agree.py")
    args = ap.parse_args()
    answers, timings = run(args.file)
    timings["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(timings), flush=True)
    if args.answers:
        pathlib.Path(args.answers).write_text(json.dumps(answers))


if __name__ == "__main__":
    sys.exit(main())
