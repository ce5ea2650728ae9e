"""A 2-process gloo DDP job for test_torch_ddp.py (run as a script: spawned
workers must import their function from a real module).

Rank 1 sleeps in forward so rank 0 waits in the all-reduce; at --nan-step,
rank 0 feeds a NaN input, so its own gradients (and its loss) are NaN.
"""

import argparse
import os
import tempfile
import time


def worker(rank, args):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import runlens
    import runlens.torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    # A file rendezvous: no port to race for on a busy machine.
    dist.init_process_group("gloo", init_method=f"file://{args.rendezvous}", rank=rank, world_size=2)
    em = runlens.Emitter(args.endpoint, run_id="ddp-test", rank=rank, world_size=2, node="n0", gpu=rank)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ddp = DDP(model)
    runlens.torch.instrument(ddp, em)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for step in range(args.steps):
        x = torch.randn(8, 16)
        if rank == 0 and step == args.nan_step:
            x[0, 0] = float("nan")
        with em.step(step) as s:
            with s.phase("forward"):
                if rank == 1:
                    time.sleep(0.03)
                loss = ddp(x).pow(2).mean()
            with s.phase("backward"):
                loss.backward()
            with s.phase("optimizer"):
                opt.step()
                opt.zero_grad()
            s.train(loss=loss.item())
    em.close(timeout=10)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--nan-step", type=int, default=3)
    args = p.parse_args()
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="runlens-ddp-test-") as workdir:
        args.rendezvous = os.path.join(workdir, "rendezvous")
        mp.spawn(worker, args=(args,), nprocs=2, join=True)


if __name__ == "__main__":
    main()
