#!/usr/bin/env python3
"""A real DDP training run on CPU, instrumented with the runlens SDK.

Four processes (torch.multiprocessing + gloo) train a tiny token model on
synthetic data, each with a runlens.Emitter and runlens.torch.instrument, so
a collector sees what a real job sends: run_start/run_end from rank 0, step,
train, data and collective events from every rank, and on demand the faults
the engine has to find:

  --slow-rank R --slow-from K --slow-ms MS   rank R sleeps MS inside forward
        from step K: its forward_ms grows, the others wait in the all-reduce
        (their comm_ms grows)
  --lr-blowup-step K   LR x 1e6 at step K (a config_change event from rank 0);
        the loss diverges to Inf/NaN within a few steps
  --slow-data-rank R --slow-data-ms MS   rank R's data loader sleeps MS per
        batch (its data_wait_ms grows)

    PYTHONPATH=build/python /usr/bin/python3 examples/ddp_train.py \
        --endpoint tcp://127.0.0.1:5555 --run-id demo --steps 60
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import socket
import sys
import tempfile
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--endpoint", default=os.environ.get("RUNLENS_ENDPOINT", "tcp://127.0.0.1:5555"))
    p.add_argument("--run-id", default=f"ddp-{int(time.time())}")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--world-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--slow-rank", type=int, default=None)
    p.add_argument("--slow-from", type=int, default=0)
    p.add_argument("--slow-ms", type=float, default=100.0)
    p.add_argument("--lr-blowup-step", type=int, default=None)
    p.add_argument("--slow-data-rank", type=int, default=None)
    p.add_argument("--slow-data-ms", type=float, default=50.0)
    p.add_argument("--checkpoint-every", type=int, default=0, help="rank 0 saves every N steps (0: never)")
    args = p.parse_args(argv)
    if args.world_size < 1:
        p.error("--world-size must be at least 1")
    for name in ("slow_rank", "slow_data_rank"):
        rank = getattr(args, name)
        if rank is not None and not 0 <= rank < args.world_size:
            p.error(f"--{name.replace('_', '-')} must be in [0, {args.world_size})")
    return args


VOCAB = 256
DIM = 32
HIDDEN = 128


def build_model():
    import torch.nn as nn

    class TinyTokenModel(nn.Module):
        """Embedding, one residual MLP block, a vocabulary head: enough real
        compute for a backward with several gradient buckets."""

        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, DIM)
            self.block = nn.Sequential(nn.Linear(DIM, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, DIM))
            self.head = nn.Linear(DIM, VOCAB)
            self.extra_forward_ms = 0.0  # the --slow-rank straggler

        def forward(self, tokens):
            if self.extra_forward_ms > 0:
                time.sleep(self.extra_forward_ms / 1000.0)
            h = self.embed(tokens)
            h = h + self.block(h)
            return self.head(h)

    return TinyTokenModel()


class SyntheticLoader:
    """Random token sequences whose target is a fixed map of the input token,
    so the loss really goes down. Deterministic per (rank, step)."""

    def __init__(self, rank, batch_size, seq_len, delay_ms):
        import torch

        self.torch = torch
        self.rank = rank
        self.batch_size = batch_size
        self.seq_len = seq_len
        self.delay_ms = delay_ms
        self.shard = f"synthetic-{rank:02d}"

    def load(self, step):
        torch = self.torch
        t0 = time.perf_counter()
        if self.delay_ms > 0:
            time.sleep(self.delay_ms / 1000.0)  # slow storage
        g = torch.Generator().manual_seed(self.rank * 1_000_003 + step)
        tokens = torch.randint(0, VOCAB, (self.batch_size, self.seq_len), generator=g)
        targets = (tokens * 7 + 3) % VOCAB
        return tokens, targets, (time.perf_counter() - t0) * 1000.0


def save_checkpoint(em, model, step, directory):
    import torch

    t0 = time.perf_counter()
    path = os.path.join(directory, f"ckpt-{step:06d}.pt")
    ok = True
    size = sha = None
    try:
        torch.save(model.state_dict(), path)
        with open(path, "rb") as f:
            blob = f.read()
        size, sha = len(blob), hashlib.sha256(blob).hexdigest()
    except OSError:
        ok = False
    em.checkpoint(
        checkpoint_id=f"ckpt-{step:06d}",
        step=step,
        duration_ms=(time.perf_counter() - t0) * 1000.0,
        size_bytes=size,
        ok=ok,
        uri=f"file://{path}",
        sha256=sha,
    )


def worker(rank, args, rendezvous, checkpoint_dir):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    import runlens
    import runlens.torch

    # 2-core machines run four of these: one thread each keeps them honest.
    torch.set_num_threads(1)
    torch.manual_seed(0)  # identical initial weights on every rank
    # Rendezvous through a file rather than MASTER_PORT: a port picked in
    # advance can be taken by someone else before rank 0 binds it.
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=args.world_size)

    node = socket.gethostname()
    em = runlens.Emitter(
        args.endpoint,
        run_id=args.run_id,
        rank=rank,
        world_size=args.world_size,
        node=node,
        gpu=rank,
        config={
            "lr": args.lr,
            "optimizer": "sgd",
            "momentum": 0.9,
            "batch_size": args.batch_size,
            "seq_len": args.seq_len,
            "world_size": args.world_size,
            "model": f"tiny-token-{DIM}x{HIDDEN}",
        },
        model_id="tiny-token-model",
        dataset_version="synthetic-v1",
        ranks=[(r, node, r) for r in range(args.world_size)],
    )

    model = build_model()
    ddp = DDP(model)
    runlens.torch.instrument(ddp, em)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    slow_data = args.slow_data_ms if rank == args.slow_data_rank else 0.0
    loader = SyntheticLoader(rank, args.batch_size, args.seq_len, slow_data)
    failed = None
    try:
        for step in range(args.steps):
            if rank == args.slow_rank and step >= args.slow_from:
                model.extra_forward_ms = args.slow_ms
            if args.lr_blowup_step is not None and step == args.lr_blowup_step:
                for group in opt.param_groups:
                    old = group["lr"]
                    group["lr"] = old * 1e6
                if rank == 0:
                    em.event("config_change", step=step, key="lr", old=old, new=old * 1e6)

            with em.step(step) as s:
                with s.phase("data"):
                    tokens, targets, load_ms = loader.load(step)
                with s.phase("forward"):
                    logits = ddp(tokens)
                    loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
                with s.phase("backward"):
                    loss.backward()  # DDP's all-reduce runs (and is waited on) in here
                grad_norm = torch.nn.utils.clip_grad_norm_(ddp.parameters(), float("inf"))
                with s.phase("optimizer"):
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                loss_value = loss.item()
                s.train(
                    loss=loss_value,
                    lr=opt.param_groups[0]["lr"],
                    grad_norm=float(grad_norm),
                    tokens=tokens.numel(),
                    samples=tokens.shape[0],
                    seq_len=tokens.shape[1],
                    dataset_shard=loader.shard,
                )
            em.data(step, batch_load_ms=load_ms, dataset_shard=loader.shard, dataset_version="synthetic-v1")
            if rank == 0 and args.checkpoint_every and (step + 1) % args.checkpoint_every == 0:
                save_checkpoint(em, model, step, checkpoint_dir)
            if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
                shown = f"{loss_value:.4f}" if math.isfinite(loss_value) else str(loss_value)
                print(f"step {step:4d}  loss {shown}  step_ms {s.step_ms:.1f}", flush=True)
    except BaseException as e:
        failed = f"{type(e).__name__}: {e}"
        raise
    finally:
        em.close(status="failed" if failed else "completed", reason=failed)
        stats = em.stats()
        print(
            f"rank {rank}: sent {stats['sent']} events, dropped {sum(stats['dropped'].values())}",
            file=sys.stderr,
            flush=True,
        )
        if not failed:
            # No rank tears the group down while another still uses it: gloo
            # can abort a process (std::terminate) whose peers went first.
            dist.barrier()
        dist.destroy_process_group()


def main(argv=None):
    args = parse_args(argv)
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="runlens-ddp-") as workdir:
        rendezvous = os.path.join(workdir, "rendezvous")
        mp.spawn(worker, args=(args, rendezvous, workdir), nprocs=args.world_size, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
