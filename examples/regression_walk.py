#!/usr/bin/env python3
"""From "v142 is worse than v141" to the training step that caused it, with
real runs on real data.

    tools/dev regression-demo            (or:)
    PYTHONPATH=build/python /usr/bin/python3 examples/regression_walk.py --out out/regression-walk

1. Starts `runlens run` (the live pipeline), `runlens serve --gates
   configs/gates` and two evaluation workers on one store (runlens_stack.py).
2. Trains three digits classifiers with examples/digits_train.py through the
   SDK (train and validation loss, lr, grad_norm; the checkpoint reported
   with checkpoint_saved): digits-mlp:v140 (150 steps), v141 (300 steps, the
   good run) and v142 (v141's config, its learning rate raised from 0.05 to
   0.5 at step 150: the bad run). The service registers each checkpoint and
   evaluates it on the 360 held-out digits (configs/eval/digits-heldout.yaml).
3. Gates and promotes v141 through the gate path (digits-release against
   v140: PASS; evaluated -> gated -> canary -> production), then gates v142
   against production (v141): FAIL on quality, which raises
   benchmark_regression alerts (GET /v1/alerts; serve --alerts-out), and its
   promotion is refused (409 with the gate's reasons).
4. Walks the regression: `runlens explain digits-mlp:v142 --baseline v141`
   names the learning-rate change and its step; GET
   /v1/models/digits-mlp/compare marks lr.
5. A third pair: two character models trained identically (fortunes-lm:lm-a
   and lm-b, the same validation loss), lm-a scored with
   fortunes-completion-v1 (prompt half-words-v1) and lm-b with
   fortunes-completion-3q-v1 (prompt three-quarter-words-v1): lm-b scores
   lower, and explain calls it an evaluation mismatch (owner evaluation),
   not a training regression.

Everything runs on loopback ports chosen at run time; every process started
is stopped by its PID at the end. run_scenario() is what
tests/python/test_regression_walk.py runs.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import digits_train  # noqa: E402
from runlens_stack import ROOT, HttpError, Stack, StackError  # noqa: E402

MODEL = "digits-mlp"
LM_MODEL = "fortunes-lm"
USER = "regression-walk"
# (checkpoint id = model version, digits_train.py arguments)
DIGITS_RUNS = [
    ("v140", ["--steps", "150"]),
    ("v141", ["--steps", "300"]),
    ("v142", ["--steps", "300", "--lr-change", "150:0.5"]),
]
LM_RUNS = ["lm-a", "lm-b"]  # trained identically
LM_STEPS = 120
LM_SUITES = {"lm-a": "fortunes-completion-v1", "lm-b": "fortunes-completion-3q-v1"}
TERMINAL = ("COMPLETED", "FAILED", "PARTIAL", "CACHED")


def train_lm(stack: Stack, ck_id: str, out: pathlib.Path, log) -> dict:
    """A character model on four fortune files (not the evaluated `fortunes`
    file), reporting loss and val_loss through the SDK."""
    import runlens
    from runlens.eval import datasets as D, models as M

    text = D.load("fortunes", files=["cookie", "wisdom", "people", "work"]).split(seed=0)
    config = {"model": "char_lm", "lr": 1e-2, "batch_size": 128, "steps": LM_STEPS, "seed": 0, "context": 12,
              "dataset": "debian-fortunes:cookie,wisdom,people,work"}
    run_id = f"charlm-{ck_id}-{time.strftime('%Y%m%dT%H%M%S')}"
    em = runlens.Emitter(stack.ingest, run_id=run_id, model_id=LM_MODEL, model_version=ck_id,
                         dataset_version=config["dataset"], config=config)
    model = M.train_char_lm(text.train, text.validation, steps=LM_STEPS, lr=config["lr"], seed=0, eval_every=40,
                            emitter=em)
    path = out / f"{ck_id}.pt"
    sha = M.save_checkpoint(model, path)
    em.checkpoint_saved(str(path), model.step, checkpoint_id=ck_id)
    em.close(timeout=5, status="completed")
    val = [h["val_loss"] for h in model.history if "val_loss" in h]
    log(f"{run_id}: {model.step} steps, val_loss {val[-1]:.4f}, checkpoint {path}")
    return {"run_id": run_id, "model_version": f"{LM_MODEL}:{ck_id}", "val_loss": val[-1], "sha256": sha,
            "path": str(path), "step": model.step}


def registered(stack: Stack, model_version: str):
    model, version = model_version.split(":")
    try:
        v = stack.http("GET", f"/v1/models/{model}/versions/{version}")
        # The run's run_start names its model version before the checkpoint
        # event registers it (the store knows the version, without a status):
        # not registered yet.
        return v if v.get("status") else None
    except HttpError as e:
        if e.code == 404:
            return None
        raise


def finished(stack: Stack, model_version: str, suite: str):
    evs = stack.http("GET", f"/v1/evaluations?modelVersion={model_version}")["evaluations"]
    evs = [e for e in evs if e["benchmarkSuite"] == suite]
    return evs[-1] if evs and all(e["status"] in TERMINAL for e in evs) else None


def promote(stack: Stack, model_version: str, to: str, gate_id=None):
    model, version = model_version.split(":")
    body = {"to": to, **({"gateId": gate_id} if gate_id else {})}
    return stack.http("POST", f"/v1/models/{model}/versions/{version}/promote", body, {"X-Runlens-User": USER})


def refused(fn, *args):
    """(status, answer) of a call expected to be refused."""
    try:
        return 200, fn(*args)
    except HttpError as e:
        return e.code, e.json if e.json is not None else e.body


def run_scenario(out: pathlib.Path, runlens: str, *, workers: int = 2, timeout: float = 180.0, log=print) -> dict:
    """Runs the whole scenario in a fresh `out` and returns what it saw (the
    trained runs, evaluations, gate decisions, promotion answers, alerts,
    explain and compare answers). Every process is stopped before it returns."""
    out = pathlib.Path(out).resolve()
    for name in ("runlens.db", "runlens.db-wal", "runlens.db-shm"):
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / "pipeline", ignore_errors=True)
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    ckpts = out / "checkpoints"
    ckpts.mkdir(parents=True)
    r: dict = {"out": str(out)}
    (out / "alerts.jsonl").unlink(missing_ok=True)
    stack = Stack(out, runlens, workers=workers, gates=ROOT / "configs" / "gates", worker_prefix="walk-w",
                  serve_args=["--alerts-out", out / "alerts.jsonl"])
    try:
        r["api"] = stack.api
        log(f"service {stack.api}/v1/, workers on {stack.workers_endpoint}, store {stack.store}")

        # --- the runs ---------------------------------------------------------
        r["digits"] = {}
        for ck_id, args in DIGITS_RUNS:
            t0 = time.monotonic()
            a = digits_train.parse_args(["--endpoint", stack.ingest, "--checkpoint-id", ck_id, "--model-id", MODEL,
                                         "--out", str(ckpts), *args])
            s = digits_train.train(a, log=log)
            s["model_version"] = f"{MODEL}:{ck_id}"
            s["args"] = args
            s["seconds"] = time.monotonic() - t0
            r["digits"][ck_id] = s

        # --- evaluations: the digits suite's on_checkpoint ----------------------------
        deadline = time.monotonic() + timeout
        ev = {}
        for s in r["digits"].values():
            v = s["model_version"]
            stack.wait(lambda: registered(stack, v), max(1.0, deadline - time.monotonic()),
                       f"{v} was not registered from its checkpoint event")
            ev[v] = stack.wait(lambda: finished(stack, v, "digits-heldout-v1"), max(1.0, deadline - time.monotonic()),
                               f"the digits evaluation of {v} did not end")

        # --- the prompt pair: trained once the workers are idle (no CPU contention in their
        # throughput), evaluated with the two prompts of one benchmark ----------------------
        r["lm"] = {ck: train_lm(stack, ck, ckpts, log) for ck in LM_RUNS}
        for ck, suite in LM_SUITES.items():
            v = f"{LM_MODEL}:{ck}"
            stack.wait(lambda: registered(stack, v), max(1.0, deadline - time.monotonic()),
                       f"{v} was not registered from its checkpoint event")
            stack.http("POST", "/v1/evaluations", {"modelVersion": v, "checkpointId": ck, "benchmarkSuite": suite})
        for ck, suite in LM_SUITES.items():
            v = f"{LM_MODEL}:{ck}"
            ev[v] = stack.wait(lambda: finished(stack, v, suite), max(1.0, deadline - time.monotonic()),
                               f"the {suite} evaluation of {v} did not end")
        r["evaluations"] = {v: stack.http("GET", f"/v1/evaluations/{e['evaluationId']}") for v, e in ev.items()}
        # What the pipeline stored of each digits run (its run_end comes last).
        r["runs"] = {}
        for ck, s in r["digits"].items():
            run = s["run_id"]
            r["runs"][ck] = {
                "summary": stack.wait(lambda: (lambda x: x if x.get("status") == "COMPLETED" else None)(
                    stack.http("GET", f"/v1/runs/{run}")), max(1.0, deadline - time.monotonic()),
                    f"run {run} did not complete in the store"),
                "timeline": stack.http("GET", f"/v1/runs/{run}/timeline")["events"],
                "steps": stack.http("GET", f"/v1/runs/{run}/steps?limit=1000")["steps"],
            }
        for v, e in r["evaluations"].items():
            log(f"{v}: {e['benchmarkSuite']} {e['status']} " +
                " ".join(f"{m['name']}={m['value']:.4f}" for m in e["metrics"]))

        # --- v141: gated against v140, promoted to production ----------------------
        v140, v141, v142 = (f"{MODEL}:{c}" for c, _ in DIGITS_RUNS)
        promote(stack, v141, "evaluated")
        g1 = stack.http("POST", "/v1/gates/evaluate", {"policy": "digits-release",
                                                       "candidate": r["evaluations"][v141]["evaluationId"],
                                                       "baseline": r["evaluations"][v140]["evaluationId"]})
        r["gate_v141"] = g1
        r["promote_v141"] = [promote(stack, v141, to, g1["gateId"]) for to in ("gated", "canary", "production")]
        log(f"gate {g1['gateId']} {v141} vs {v140}: {g1['verdict']}; promoted to production")

        # --- v142: gated against production, refused -------------------------------
        promote(stack, v142, "evaluated")
        g2 = stack.http("POST", "/v1/gates/evaluate", {"policy": "digits-release",
                                                       "candidate": r["evaluations"][v142]["evaluationId"]})
        r["gate_v142"] = g2
        # The FAIL raised evaluation alerts: in the store (GET /v1/alerts) and in serve's --alerts-out file.
        r["alerts"] = stack.http("GET", "/v1/alerts?kind=benchmark_regression")["alerts"]
        r["alerts_jsonl"] = [json.loads(line) for line in (out / "alerts.jsonl").read_text().splitlines() if line]
        r["promote_v142"] = refused(promote, stack, v142, "gated")
        cli = stack.cli("eval", "promote", "--server", stack.api, "--model-version", v142, "--to", "gated", "--user",
                        USER, check=False)
        r["promote_v142_cli"] = {"rc": cli.returncode, "stdout": cli.stdout, "stderr": cli.stderr}
        r["status_v142"] = registered(stack, v142)["status"]
        r["status_v141"] = registered(stack, v141)["status"]
        r["audit_v141"] = stack.http("GET", f"/v1/models/{MODEL}/versions/v141/audit")["audit"]

        # --- the walk: why is v142 worse than v141; why does lm-b score lower than lm-a ---
        r["explain_v142"] = json.loads(stack.cli("explain", v142, "--baseline", "v141", "--server", stack.api,
                                                 "--json").stdout)
        r["explain_v142_text"] = stack.cli("explain", v142, "--baseline", "v141", "--server", stack.api).stdout
        r["explain_v142_route"] = stack.http("GET", f"/v1/models/{MODEL}/versions/v142/explain")  # baseline: production
        r["compare"] = stack.http("GET", f"/v1/models/{MODEL}/compare?left=v141&right=v142")
        lm_b = f"{LM_MODEL}:lm-b"
        r["explain_lm"] = json.loads(stack.cli("explain", lm_b, "--baseline", "lm-a", "--server", stack.api,
                                               "--json").stdout)
        r["explain_lm_text"] = stack.cli("explain", lm_b, "--baseline", "lm-a", "--server", stack.api).stdout
        r["compare_lm"] = stack.http("GET", f"/v1/models/{LM_MODEL}/compare?left=lm-a&right=lm-b")
        return r
    finally:
        stack.stop()


def print_summary(r: dict) -> None:
    print()
    print("training runs (validation loss reported through the SDK; items 1293-1436):")
    for ck, s in r["digits"].items():
        change = " ".join(s["args"][2:])
        print(f"  {s['model_version']:<18} run {s['run_id']:<34} val_loss {s['val_loss']:8.4f}  "
              f"val_accuracy {s['val_accuracy']:.4f}  lr at the end {s['lr']:g}  {change}".rstrip())
    for ck, s in r["lm"].items():
        print(f"  {s['model_version']:<18} run {s['run_id']:<34} val_loss {s['val_loss']:8.4f}")
    print("held-out evaluations (the service, on its workers):")
    for v, e in r["evaluations"].items():
        ms = "  ".join(f"{m['name']} {m['value']:.4f}" for m in e["metrics"])
        print(f"  {v:<18} {e['evaluationId']} {e['benchmarkSuite']:<31} {e['status']:<9} {ms}")
    for name in ("gate_v141", "gate_v142"):
        g = r[name]
        print(f"{name.replace('_', ' ')}: {g['gateId']} {g['verdict']} (candidate {g['candidateEvaluation']}, "
              f"baseline {g['baselineEvaluation']}, alpha {g['alpha']})")
        for m in g["metrics"]:
            print(f"  {m['dimension']}/{m['metric']:<9} difference {m['difference']:+.4f}  "
                  f"bounds [{m['lower']:+.4f}, {m['upper']:+.4f}]  margin {m['margin']}  {m['verdict']}")
        for reason in g.get("reasons", []):
            print(f"  reason: {reason}")
    print("alerts (GET /v1/alerts?kind=benchmark_regression):")
    for a in r["alerts"]:
        print(f"  {a['alert_id']} {a['kind']} {a['severity']}: {a['summary']}")
    code, body = r["promote_v142"]
    print(f"promote digits-mlp:v142 to gated: {code} {body.get('error', '') if isinstance(body, dict) else body}")
    for reason in (body.get("reasons", []) if isinstance(body, dict) else []):
        print(f"  {reason}")
    cli = r["promote_v142_cli"]
    print(f"runlens eval promote --model-version digits-mlp:v142 --to gated: exit {cli['rc']}")
    for line in (cli["stdout"] + cli["stderr"]).splitlines():
        print(f"  {line}")
    print(f"status: v141 {r['status_v141']}, v142 {r['status_v142']}")
    lr = next(c for c in r["compare"]["config"] if c["key"] == "lr")
    print(f"GET /v1/models/digits-mlp/compare?left=v141&right=v142: lr {lr['left']} -> {lr['right']} "
          f"(changed: {lr['changed']}, at step {lr['rightStep']})")
    print()
    print("$ runlens explain digits-mlp:v142 --baseline v141")
    print(r["explain_v142_text"].rstrip())
    print()
    print("$ runlens explain fortunes-lm:lm-b --baseline lm-a")
    print(r["explain_lm_text"].rstrip())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="out/regression-walk", help="the store, checkpoints and logs (reset each run)")
    p.add_argument("--runlens", default=str(ROOT / "build" / "runlens"))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the evaluations")
    p.add_argument("--json", action="store_true", help="print what the scenario saw as JSON")
    a = p.parse_args(argv)
    try:
        r = run_scenario(pathlib.Path(a.out), a.runlens, workers=a.workers, timeout=a.timeout,
                         log=lambda *x: print(*x, flush=True))
    except StackError as e:
        raise SystemExit(f"regression_walk: {e}")
    if a.json:
        json.dump(r, sys.stdout, indent=1, default=str)
        print()
    else:
        print_summary(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
