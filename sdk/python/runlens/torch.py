"""runlens.torch: instrument a torch DistributedDataParallel model.

    ddp = torch.nn.parallel.DistributedDataParallel(model)
    runlens.torch.instrument(ddp, em)     # before the first backward

What it adds to each step scope of `em` (docs/sdk.md):

* comm_ms: the all-reduce wait. A DDP communication hook all-reduces each
  gradient bucket exactly as DDP's default hook does (divide by the group
  size, all_reduce, return the bucket) and notes two times: when the last
  bucket of a backward pass is launched (this rank's gradients are all
  computed) and when the last all-reduce future of that pass completes. The
  difference is the time this rank's backward sits waiting on communication
  after its own compute is done: near zero on the slowest rank, about the
  straggler's lead on the others. Summed over the backward passes of the
  step and added to comm_ms (on top of any s.phase("comm")).
* a `collective` event (op "allreduce") per step: latency_ms from the first
  bucket's launch to the last completion, bytes of all buckets.
* nan_count / inf_count on the train event: NaN and Inf elements in this
  rank's local gradients (counted in each bucket before the all-reduce, so
  the rank that produced them is the one that reports them) plus 1 for a
  NaN or Inf loss given to s.train(loss=...). Sent whenever the step has a
  train event or a count is non-zero.
* mem_allocated_bytes, mem_reserved_bytes, mem_peak_bytes when the model is
  on a CUDA device: torch.cuda.memory_allocated / memory_reserved at the end
  of the step and max_memory_allocated since the step began (the peak
  counter is reset when each step scope opens).

Nothing here raises into training because of telemetry: bookkeeping errors
are caught and counted (stats()["sdk_errors"] of the emitter, and
Instrument.errors). An all-reduce that fails still fails the step, as with
DDP's own hook.
"""

from __future__ import annotations

import math
import threading
import time

_perf_ns = time.perf_counter_ns


class _Pass:
    """The all-reduces of one backward pass."""

    __slots__ = ("first_launch_ns", "last_ready_ns", "last_done_ns", "nbytes")

    def __init__(self):
        self.first_launch_ns = None
        self.last_ready_ns = None
        self.last_done_ns = None
        self.nbytes = 0


class Instrument:
    """Returned by instrument(); an observer of the emitter's step scopes."""

    def __init__(self, ddp_model, emitter, count_nonfinite, memory, collectives):
        import torch
        import torch.distributed as dist

        self._torch = torch
        self._emitter = emitter
        self._group = getattr(ddp_model, "process_group", None) or dist.group.WORLD
        self._world = dist.get_world_size(self._group)
        self._count_nonfinite = count_nonfinite
        self._collectives = collectives
        self._lock = threading.Lock()  # hooks run on autograd and comm threads
        self._passes = []
        self._open = None
        self._nan = None
        self._inf = None
        self.errors = 0
        self._cuda_device = None
        if memory and torch.cuda.is_available():
            param = next(ddp_model.module.parameters(), None)
            if param is not None and param.device.type == "cuda":
                self._cuda_device = param.device

    # --- the communication hook (DDP calls it once per bucket) ---------------

    def _before_allreduce(self, bucket, tensor):
        try:
            if self._count_nonfinite:
                torch = self._torch
                nan = torch.isnan(tensor).sum()  # stays a tensor: no device sync here
                inf = torch.isinf(tensor).sum()
            with self._lock:
                if self._count_nonfinite:
                    self._nan = nan if self._nan is None else self._nan + nan
                    self._inf = inf if self._inf is None else self._inf + inf
                current = self._open
                if current is None:
                    current = self._open = _Pass()
                    self._passes.append(current)
                current.nbytes += tensor.numel() * tensor.element_size()
                now = _perf_ns()
                if current.first_launch_ns is None:
                    current.first_launch_ns = now
                if bucket.is_last():
                    current.last_ready_ns = now
                    self._open = None
            return current
        except Exception:
            self.errors += 1
            return None

    def _after_allreduce(self, current):
        now = _perf_ns()
        try:
            if current is not None:
                with self._lock:
                    if current.last_done_ns is None or now > current.last_done_ns:
                        current.last_done_ns = now
        except Exception:
            self.errors += 1

    # --- step observer -------------------------------------------------------

    def step_begin(self, scope):
        with self._lock:
            self._passes = []
            self._open = None
            self._nan = None
            self._inf = None
        if self._cuda_device is not None:
            self._torch.cuda.reset_peak_memory_stats(self._cuda_device)

    def step_end(self, scope):
        with self._lock:
            passes, self._passes, self._open = self._passes, [], None
            nan, inf, self._nan, self._inf = self._nan, self._inf, None, None

        waits = [
            p.last_done_ns - p.last_ready_ns
            for p in passes
            if p.last_ready_ns is not None and p.last_done_ns is not None
        ]
        if waits:
            scope.add_ms("comm_ms", max(0, sum(waits)) / 1e6)
        if self._collectives:
            done = [p for p in passes if p.first_launch_ns is not None and p.last_done_ns is not None]
            if done:
                self._emitter.collective(
                    scope.step,
                    op="allreduce",
                    latency_ms=sum(p.last_done_ns - p.first_launch_ns for p in done) / 1e6,
                    bytes=sum(p.nbytes for p in done),
                )

        if self._count_nonfinite:
            nan_count = int(nan.item()) if nan is not None else 0
            inf_count = int(inf.item()) if inf is not None else 0
            loss = scope._train.get("loss")
            if loss is not None:
                try:
                    value = float(loss)
                    nan_count += math.isnan(value)
                    inf_count += math.isinf(value)
                except Exception:
                    pass
            if scope._train or nan_count or inf_count:
                scope.train(nan_count=nan_count, inf_count=inf_count)

        if self._cuda_device is not None:
            cuda = self._torch.cuda
            scope.set(
                mem_allocated_bytes=cuda.memory_allocated(self._cuda_device),
                mem_reserved_bytes=cuda.memory_reserved(self._cuda_device),
                mem_peak_bytes=cuda.max_memory_allocated(self._cuda_device),
            )


def _allreduce_hook(state, bucket):
    """DDP's default all-reduce (torch.distributed.algorithms.ddp_comm_hooks.
    default_hooks.allreduce_hook), with the instrument's timestamps around it."""
    import torch.distributed as dist

    tensor = bucket.buffer()
    current = state._before_allreduce(bucket, tensor)
    tensor.div_(state._world)
    future = dist.all_reduce(tensor, group=state._group, async_op=True).get_future()

    def done(fut):
        state._after_allreduce(current)
        return fut.value()[0]  # raises if the all-reduce failed, as the default hook does

    return future.then(done)


def instrument(ddp_model, emitter, *, count_nonfinite=True, memory=True, collectives=True):
    """Register runlens' communication hook on `ddp_model` (a
    torch.nn.parallel.DistributedDataParallel) and attach it to `emitter`'s
    step scopes. Call once, after wrapping the model and before the first
    backward; a DDP model takes one communication hook only, so this replaces
    none you registered (torch raises if there is one)."""
    inst = Instrument(ddp_model, emitter, count_nonfinite, memory, collectives)
    ddp_model.register_comm_hook(inst, _allreduce_hook)
    emitter.add_observer(inst)
    return inst
