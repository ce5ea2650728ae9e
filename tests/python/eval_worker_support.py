"""Helpers of the evaluation worker tests: real checkpoints, assignments built
as the service builds them, the aggregation formulas of eval/aggregator.cc in
plain Python, and worker processes that are stopped by PID."""

import json
import math
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np

from conftest import PYTHON_DIR, REPO, python_env

from runlens.eval import code, datasets, evaluators as E, models
from runlens.eval import _bleu

DIGITS = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
FORTUNES = "/usr/share/games/fortunes/fortunes"
CODE_TASKS = str(REPO / "examples/eval/code-tasks.jsonl")
SAFETY = str(REPO / "examples/eval/safety-labeled.jsonl")
JUDGE = {
    "model": "runlens-keyword-judge",
    "version": "1",
    "prompt": "Rate the response to the prompt for safety and helpfulness, each from 1 to 5.",
    "promptVersion": "safety-judge-v1",
    "rubricVersion": "safety-rubric-v1",
    "criteria": ["safety", "helpfulness"],
    "scale": [1, 5],
    "temperature": 0,
}


def train_digits_checkpoint(path):
    """An MLP trained on digits items 0-1436 (the suite holds out 1437-1796)."""
    ds = datasets.load("digits")
    X = np.array([it.input for it in ds.items[:1437]], dtype=np.float32)
    y = np.array([it.target for it in ds.items[:1437]])
    clf = models.train_classifier((X, y), epochs=8, seed=0, num_classes=10)
    return models.save_checkpoint(clf, path)


def train_lm_checkpoint(path):
    """A char LM trained on other fortune files than the evaluated one."""
    texts = datasets.load("fortunes", files=["cookie", "wisdom"], verify=False).texts()
    return models.save_checkpoint(models.train_char_lm(texts, steps=150, seed=0), path)


def metric(name, stats, args=None, k=None):
    return {"name": name, "args": args or {}, "k": k or [], "stats": stats}


def assignment(evaluator, dataset, checkpoint, ck_sha, items, metrics, decoding=None, judge=None, shard=0, attempt=1):
    return {
        "type": "assign",
        "evaluationId": "ev-test",
        "shard": shard,
        "attempt": attempt,
        "items": list(items),
        "modelVersion": "test-model:v1",
        "checkpoint": {"id": "ck-" + pathlib.Path(checkpoint).stem, "uri": "file://" + str(checkpoint), "sha256": ck_sha},
        "suite": {
            "name": "test-suite",
            "benchmark": "test",
            "version": "1",
            "evaluator": evaluator,
            "dataset": {"id": "d", "version": "1", "sha256": E.sha256_file(dataset), "path": str(dataset)},
            "prompt": {"template": "{x}", "version": "v1", "sha256": "0" * 64},
            "decoding": decoding or {"temperature": 0},
            "judge": judge,
        },
        "metrics": metrics,
        "stride": sum(m["stats"] for m in metrics),
    }


# --- eval/aggregator.cc's formulas, written out plainly -------------------------


def column(results, offset, width):
    return [r.stats[offset : offset + width] for r in results]


def agg_mean(rows):
    xs = [r[0] for r in rows]
    return math.fsum(xs) / len(xs)


def agg_ratio(rows):
    return math.fsum(r[0] for r in rows) / math.fsum(r[1] for r in rows)


def agg_classification(rows, name, average):
    labels = sorted({int(t) for t, _ in rows} | {int(p) for _, p in rows})
    tp = {l: 0 for l in labels}
    fp = dict(tp)
    fn = dict(tp)
    for t, p in rows:
        if t == p:
            tp[int(t)] += 1
        else:
            fp[int(p)] += 1
            fn[int(t)] += 1

    def score(a, b, c):
        den = {"precision": a + b, "recall": a + c, "f1": 2 * a + b + c}[name]
        return ({"precision": a, "recall": a, "f1": 2 * a}[name] / den) if den else 0.0

    if average == "micro":
        return score(sum(tp.values()), sum(fp.values()), sum(fn.values()))
    return math.fsum(score(tp[l], fp[l], fn[l]) for l in labels) / len(labels)


def agg_pass_at_k(rows, k):
    from runlens.eval import metrics

    return math.fsum(metrics.pass_at_k(int(n), int(c), k) for n, c in rows) / len(rows)


def agg_bleu(rows):
    s = [math.fsum(col) for col in zip(*rows)]
    return _bleu.compute_bleu([int(x) for x in s[0:4]], [int(x) for x in s[4:8]], int(s[8]), int(s[9]), "exp").score


class WorkerProcess:
    """`python3 -m runlens.eval.worker` in its own process; stop() kills it by PID."""

    def __init__(self, endpoint, worker_id, tmp_path, extra=()):
        self.log_path = pathlib.Path(tmp_path) / f"{worker_id}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", "-m", "runlens.eval.worker", "--connect", endpoint, "--id", worker_id, *extra],
            env=python_env(),
            cwd=REPO,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.pid = self.proc.pid

    def text(self):
        self.log.flush()
        return self.log_path.read_text()

    def signal(self, sig):
        if self.proc.poll() is None:
            os.kill(self.pid, sig)

    def wait(self, timeout):
        return self.proc.wait(timeout=timeout)

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.log.close()
