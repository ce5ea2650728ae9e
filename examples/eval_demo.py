#!/usr/bin/env python3
"""The evaluation service end to end, on this machine's own models and data.

    PYTHONPATH=build/python /usr/bin/python3 examples/eval_demo.py --out out/eval-demo

1. Starts a live pipeline (`runlens run`) and the service (`runlens serve`)
   on one store, and two worker processes (`runlens eval worker`).
2. Trains two small real PyTorch models with the runlens SDK: two versions
   of a digits classifier (scikit-learn's digits, from Debian's
   python3-sklearn) and a character language model (Debian's fortunes).
   Each job saves its checkpoint and reports it with `em.checkpoint_saved`;
   the event flows through the pipeline into the store, where the service
   registers the checkpoint and creates the evaluations its suites ask for
   (configs/eval/*.yaml, `on_checkpoint`).
3. The workers evaluate the shards; the results print with their provenance.

Training is deterministic, so a second run of the same command saves the
same checkpoint bytes: every evaluation is then served from the cache
(CACHED, pointing at the first run's evaluation) and no worker runs a shard.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from runlens_stack import ROOT, HttpError, Stack, StackError, http_json  # noqa: E402

# (model id, checkpoint id, kind, training arguments). The model version the
# service registers for each checkpoint is MODEL:CHECKPOINT_ID.
MODELS = [
    ("digits-mlp", "mlp-v1", "classifier", {"hidden": (32,), "epochs": 8, "seed": 0}),
    ("digits-mlp", "mlp-v2", "classifier", {"hidden": (128,), "epochs": 30, "seed": 0}),
    ("fortunes-charlm", "charlm-v1", "lm", {"steps": 300, "seed": 0}),
]


def train(kind: str, model_id: str, ckpt_id: str, args: dict, out: pathlib.Path, endpoint: str) -> pathlib.Path:
    import runlens
    from runlens.eval import datasets as D, models as M

    run_id = f"train-{ckpt_id}-{time.strftime('%Y%m%dT%H%M%S')}"
    em = runlens.Emitter(endpoint, run_id=run_id, model_id=model_id, model_version=ckpt_id,
                         config={k: str(v) for k, v in args.items()})
    path = out / "checkpoints" / f"{ckpt_id}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "classifier":
        # configs/eval/digits-heldout.yaml evaluates items 1437-1796: train
        # on the first 1293 and validate on the next 144, never on those.
        X, y = D.load("digits").arrays()
        model = M.train_classifier((X[:1293], y[:1293]), (X[1293:1437], y[1293:1437]), num_classes=10,
                                   epochs=args["epochs"], hidden=args["hidden"], seed=args["seed"], emitter=em)
    else:
        # configs/eval/fortunes-perplexity.yaml scores the `fortunes` file:
        # train on other fortune files.
        text = D.load("fortunes", files=["cookie", "wisdom", "people", "work"]).split(seed=0)
        model = M.train_char_lm(text.train, text.validation, steps=args["steps"], seed=args["seed"], emitter=em)
    M.save_checkpoint(model, path)
    em.checkpoint_saved(str(path), model.step, checkpoint_id=ckpt_id)
    em.close(timeout=2, status="completed")
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="out/eval-demo", help="keeps the store and checkpoints between runs")
    p.add_argument("--runlens", default=str(ROOT / "build" / "runlens"))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the evaluations")
    a = p.parse_args(argv)

    out = pathlib.Path(a.out).resolve()
    try:
        stack = Stack(out, a.runlens, workers=a.workers, worker_prefix="demo-w")
    except StackError as e:
        raise SystemExit(f"eval_demo: {e}")
    api, ingest, logs, store = stack.api, stack.ingest, stack.logs, stack.store
    try:
        print(f"service {api}/v1/, workers on {stack.workers_endpoint}, store {store}", flush=True)

        versions = [f"{m}:{c}" for m, c, _, _ in MODELS] + ["code-sampler:mutation-v1"]
        listed = lambda v: http_json(f"{api}/v1/evaluations?modelVersion={v}")["evaluations"]  # noqa: E731
        before = {v: {e["evaluationId"]: e for e in listed(v)} for v in versions}

        # The code suite's "model" samples candidate programs by mutating
        # reference solutions (it passes only sometimes, so pass@k lies
        # strictly between 0 and 1); its checkpoint is its configuration.
        # It has no training run: register it through the API.
        from runlens.eval import code as C, evaluators as E
        sampler = out / "checkpoints" / "code-mutation-v1.json"
        sampler.parent.mkdir(parents=True, exist_ok=True)
        E.save_sampler_checkpoint(sampler, C.MutationSampler(seed=0, p_mutate=0.6, max_mutations=2))
        subprocess.run([a.runlens, "eval", "register", "--server", api, "--checkpoint", "code-mutation-v1", "--file",
                        str(sampler), "--model-version", "code-sampler:mutation-v1"], check=True,
                       stdout=subprocess.DEVNULL)
        for model_id, ckpt_id, kind, args in MODELS:
            t0 = time.monotonic()
            path = train(kind, model_id, ckpt_id, args, out, ingest)
            print(f"trained {model_id} -> {path.name} in {time.monotonic() - t0:.1f} s", flush=True)

        # The checkpoints reach the service through the pipeline's store: wait
        # until each version is registered. A first run's registration creates
        # the evaluations. A checkpoint registered before (a second run: the
        # same bytes) creates none, so ask for the same evaluations again:
        # the cache answers them.
        deadline = time.monotonic() + a.timeout
        for v in versions:
            model, version = v.split(":")
            while True:
                try:
                    http_json(f"{api}/v1/models/{model}/versions/{version}")
                    break
                except HttpError:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"eval_demo: {v} was never registered (logs in {logs})")
                    time.sleep(0.1)
            for e in before[v].values():
                again = http_json(f"{api}/v1/evaluations", {"modelVersion": v, "checkpointId": e["checkpointId"],
                                                            "benchmarkSuite": e["benchmarkSuite"]})
                print(f"{v}: evaluated before ({e['evaluationId']}); asked again: {again['evaluationId']} "
                      f"{again['status']}", flush=True)

        # Wait until each version's new evaluations have all ended.
        final: dict[str, list] = {}
        while time.monotonic() < deadline and len(final) < len(versions):
            for v in versions:
                if v in final:
                    continue
                items = [e for e in listed(v) if e["evaluationId"] not in before[v]]
                if items and all(e["status"] not in ("QUEUED", "RUNNING") for e in items):
                    final[v] = items
            time.sleep(0.2)
        missing = [v for v in versions if v not in final]
        if missing:
            raise SystemExit(f"eval_demo: no finished evaluations for {', '.join(missing)} after {a.timeout:.0f} s "
                             f"(logs in {logs})")
        for v in versions:
            for e in sorted(final[v], key=lambda e: e["evaluationId"]):
                subprocess.run([a.runlens, "eval", "show", e["evaluationId"], "--server", api], check=True)
                print()
        done = [e for v in versions for e in final[v]]
        cached = sum(e["status"] == "CACHED" for e in done)
        counters = http_json(f"{api}/v1/workers")["counters"]
        print(f"{len(done)} evaluations of {len(versions)} model versions: {len(done) - cached} run by "
              f"{a.workers} workers ({counters['accepted']} shard results), {cached} from the cache; "
              f"store {store}", flush=True)
        return 0
    finally:
        stack.stop()

if __name__ == "__main__":
    sys.exit(main())
