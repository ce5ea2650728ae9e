#!/usr/bin/env python3
"""A real training run on real data, reporting train and validation loss
through the runlens SDK.

An MLP classifier (PyTorch, SGD with momentum) learns scikit-learn's handwritten digits
(1797 8x8 images, from Debian's python3-sklearn). The items are split by
position, as configs/eval/digits-heldout.yaml expects:

    0-1292     training
    1293-1436  validation (val_loss and val_accuracy every --val-every steps)
    1437-1796  held out: never seen here; the evaluation service scores them

Every optimizer step is a step scope of a runlens.Emitter (phases forward,
backward, optimizer; train fields loss, lr, grad_norm; val_loss on validation
steps); the run_start config carries the run's hyperparameters and dataset.
The final checkpoint (and, with --checkpoint-every, intermediate ones) is
written with runlens.eval.models.save_checkpoint and reported with
`Emitter.checkpoint_saved`, so a pipeline on the same store hands it to the
evaluation service, which registers MODEL_ID:CHECKPOINT_ID.

`--lr-change STEP:LR` sets the learning rate to LR from step STEP on and
reports it as a `config_change` event (key lr, old, new) at that step: the
same run with, for example, `--lr-change 150:0.5` (ten times the default
0.05) ends with a clearly worse
validation loss and held-out accuracy. Deterministic for a --seed: the same
arguments write the same checkpoint bytes.

    PYTHONPATH=build/python /usr/bin/python3 examples/digits_train.py \\
        --endpoint tcp://127.0.0.1:5555 --checkpoint-id v141 --out out/digits
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys
import time

TRAIN_END = 1293  # items [0, TRAIN_END) train
VAL_END = 1437  # items [TRAIN_END, VAL_END) validate; the rest is the evaluation's held-out split


def lr_change(text: str):
    step, sep, lr = text.partition(":")
    try:
        out = (int(step), float(lr))
    except ValueError:
        out = None
    if not sep or out is None or out[0] < 0 or not (out[1] > 0 and math.isfinite(out[1])):
        raise argparse.ArgumentTypeError(f"expected STEP:LR (a step >= 0 and a positive learning rate), got {text!r}")
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--endpoint", default=os.environ.get("RUNLENS_ENDPOINT", "tcp://127.0.0.1:5555"))
    p.add_argument("--run-id", default=None, help="default: digits-CHECKPOINT_ID-TIME")
    p.add_argument("--model-id", default="digits-mlp")
    p.add_argument("--checkpoint-id", default="v1", help="the final checkpoint's id (the model version)")
    p.add_argument("--out", default="out/digits", help="directory of the checkpoints")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--hidden", type=int, nargs="+", default=[64], help="hidden layer widths")
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--val-every", type=int, default=25, help="validation loss every N steps (and at the last)")
    p.add_argument("--checkpoint-every", type=int, default=0, help="also save every N steps (0: only the last)")
    p.add_argument("--lr-change", type=lr_change, action="append", default=[], metavar="STEP:LR",
                   help="set the learning rate to LR from step STEP on (a config_change event); repeatable")
    a = p.parse_args(argv)
    if a.steps < 1 or a.batch_size < 1 or a.val_every < 1 or a.checkpoint_every < 0:
        p.error("--steps, --batch-size and --val-every must be positive, --checkpoint-every >= 0")
    for step, _ in a.lr_change:
        if step >= a.steps:
            p.error(f"--lr-change step {step} is not below --steps {a.steps}")
    return a


def train(a, emitter=None, log=print) -> dict:
    """Trains as the module docstring says. With `emitter` (a runlens.Emitter)
    reports through it and leaves it open; without one, builds one from
    a.endpoint and closes it at the end. Returns a summary: run_id, the
    checkpoints [{checkpoint_id, step, path, sha256}], the history of
    validation records, the final val_loss/val_accuracy and lr."""
    import numpy as np
    import torch
    from torch import nn

    import runlens
    from runlens.eval import datasets as D, models as M

    ds = D.load("digits")
    X, y = ds.arrays()
    X = torch.as_tensor(np.asarray(X, dtype=np.float32))
    y = torch.as_tensor(np.asarray(y, dtype=np.int64))
    Xt, yt = X[:TRAIN_END], y[:TRAIN_END]
    Xv, yv = X[TRAIN_END:VAL_END], y[TRAIN_END:VAL_END]
    dataset = f"{ds.name}@{ds.version}"

    config = {
        "model": "mlp_classifier",
        "lr": a.lr,
        "batch_size": a.batch_size,
        "hidden": "x".join(str(h) for h in a.hidden),
        "optimizer": "sgd",
        "momentum": a.momentum,
        "weight_decay": a.weight_decay,
        "steps": a.steps,
        "seed": a.seed,
        "dataset": dataset,
        "train_items": f"0-{TRAIN_END - 1}",
        "val_items": f"{TRAIN_END}-{VAL_END - 1}",
    }
    run_id = a.run_id or f"digits-{a.checkpoint_id}-{time.strftime('%Y%m%dT%H%M%S')}"
    own = emitter is None
    if own:
        emitter = runlens.Emitter(a.endpoint, run_id=run_id, model_id=a.model_id, model_version=a.checkpoint_id,
                                  dataset_version=dataset, config=config)
    else:
        run_id = emitter.run_id
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(a.seed)
        module = M.MLPClassifier(X.shape[1], 10, a.hidden)
    with torch.no_grad():
        module.mean.copy_(Xt.mean(0))
        module.scale.copy_(Xt.std(0).clamp_min(1e-3))
    # What load_checkpoint rebuilds the module from, then the run's config.
    model_config = {**config, "num_features": int(X.shape[1]), "num_classes": 10, "hidden": list(a.hidden),
                    "run_id": run_id}
    model = M.Model("mlp_classifier", module, model_config)
    opt = torch.optim.SGD(module.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(a.seed)
    changes = dict(a.lr_change)
    lr = a.lr
    order, pos = torch.randperm(TRAIN_END, generator=gen), 0
    history, checkpoints = [], []

    def save(step):
        ck_id = a.checkpoint_id if step == a.steps else f"{a.checkpoint_id}-step{step}"
        path = out / f"{ck_id}.pt"
        model.step = step
        model.config["lr_at_checkpoint"] = lr
        sha = M.save_checkpoint(model, path)
        emitter.checkpoint_saved(str(path), step, checkpoint_id=ck_id)
        checkpoints.append({"checkpoint_id": ck_id, "step": step, "path": str(path.resolve()), "sha256": sha})

    for step in range(a.steps):
        if step in changes and changes[step] != lr:
            old, lr = lr, changes[step]
            for g in opt.param_groups:
                g["lr"] = lr
            emitter.event("config_change", step=step, key="lr", old=old, new=lr)
            log(f"{run_id}: step {step}: lr {old:g} -> {lr:g}")
        if pos + a.batch_size > TRAIN_END:
            order, pos = torch.randperm(TRAIN_END, generator=gen), 0
        idx = order[pos:pos + a.batch_size]
        pos += a.batch_size
        module.train()
        with emitter.step(step) as s:
            with s.phase("forward"):
                loss = loss_fn(module(Xt[idx]), yt[idx])
            with s.phase("backward"):
                opt.zero_grad()
                loss.backward()
                grad_norm = float(torch.nn.utils.clip_grad_norm_(module.parameters(), float("inf")))
            with s.phase("optimizer"):
                opt.step()
            fields = {"loss": float(loss), "lr": lr, "grad_norm": grad_norm}
            last = step == a.steps - 1
            if (step + 1) % a.val_every == 0 or last:
                module.eval()
                with torch.no_grad():
                    logits = module(Xv)
                    val_loss = float(loss_fn(logits, yv))
                    val_acc = float((logits.argmax(1) == yv).float().mean())
                fields["val_loss"] = val_loss
                history.append({"step": step, "loss": fields["loss"], "val_loss": val_loss, "val_accuracy": val_acc,
                                "lr": lr})
            s.train(**fields)
            s.set(samples=len(idx))
        if a.checkpoint_every and (step + 1) % a.checkpoint_every == 0 and step + 1 < a.steps:
            save(step + 1)
    module.eval()
    save(a.steps)
    if own:
        emitter.close(timeout=5, status="completed")
    final = history[-1]
    log(f"{run_id}: {a.steps} steps, val_loss {final['val_loss']:.4f}, val_accuracy {final['val_accuracy']:.4f}, "
        f"checkpoint {checkpoints[-1]['path']}")
    return {"run_id": run_id, "config": config, "checkpoints": checkpoints, "history": history,
            "val_loss": final["val_loss"], "val_accuracy": final["val_accuracy"], "lr": lr}


def main(argv=None) -> int:
    a = parse_args(argv)
    summary = train(a)
    json.dump(summary, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
