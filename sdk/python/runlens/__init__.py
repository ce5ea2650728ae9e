"""runlens training-side SDK.

Telemetry never breaks training: every call here that the training loop makes
returns quickly and never raises because of telemetry (bad endpoint, dead or
slow collector, a value that does not convert). Events go into bounded
lock-free rings of the C++ core (runlens._native) and a background thread
ships them to the collector as Cap'n Proto batches over ZeroMQ PUSH; when the
rings are full, new events are dropped and counted by priority.

    import runlens
    em = runlens.Emitter("tcp://127.0.0.1:5555", run_id="r1", rank=rank,
                         world_size=4, node="node-0", gpu=rank,
                         config={"lr": 1e-3})      # rank 0 sends run_start
    with em.step(step) as s:                      # times the whole step
        with s.phase("data"):      batch = next(it)
        with s.phase("forward"):   out = model(batch)
        with s.phase("backward"):  loss.backward()
        with s.phase("optimizer"): opt.step()
        s.train(loss=loss.item(), lr=lr, grad_norm=gn, tokens=n)
    em.event("config_change", key="lr", old=1e-3, new=1e-2)
    em.close()                                    # rank 0 sends run_end

See docs/sdk.md for the full contract.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import queue
import sys
import threading
import time
import warnings
import weakref

try:
    _native = importlib.import_module("._native", __name__)
except ImportError as _native_error:
    # Without the C++ module, runlens.eval and the other pure-Python parts
    # still import; Emitter() and decode_batch() raise ImportError (the reason
    # is in the message).
    from . import _no_native as _native

    _native.error = _native_error
decode_batch = _native.decode_batch
decode_progress = _native.decode_progress

__all__ = [
    "Emitter",
    "StepScope",
    "decode_batch",
    "decode_progress",
    "FIELDS",
    "PHASE_FIELDS",
    "DEFAULT_ENDPOINT",
]

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5555"

#: Field names each event type accepts (JSONL contract names).
FIELDS = {kind: frozenset(names) for kind, names in _native.FIELDS.items()}

#: Phase names that fill a field of the step event; other phase names are
#: timed (StepScope.phases) but not sent.
PHASE_FIELDS = {
    "data": "data_wait_ms",
    "forward": "forward_ms",
    "backward": "backward_ms",
    "optimizer": "optimizer_ms",
    "comm": "comm_ms",
}

# What StepScope.train()/set() route where. `step` is the scope's own and
# `time_ns` is the step's end, so neither can be set through a scope.
_STEP_ONLY = FIELDS["step"] - {"step", "time_ns"}
_TRAIN_ONLY = FIELDS["train"] - {"step", "time_ns"}

_perf_ns = time.perf_counter_ns


def __getattr__(name):
    # `runlens.torch` without importing torch for users who never touch it.
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'runlens' has no attribute {name!r}")


_URI_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/")


def _uri_path(path):
    """An absolute path percent-encoded for a file:// URI (RFC 8089)."""
    if all(ch in _URI_SAFE for ch in path):
        return path
    return "".join(ch if ch in _URI_SAFE else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogateescape")) for ch in path)


def _failure_kind(exc_type, exc):
    """The `event` kind for an exception leaving a step, or None for the
    exceptions that end a loop normally."""
    if exc_type is None or issubclass(exc_type, (StopIteration, StopAsyncIteration, GeneratorExit)):
        return None
    if not issubclass(exc_type, Exception):
        return "abort"  # KeyboardInterrupt, SystemExit
    text = f"{exc_type.__name__} {exc}".lower()
    if "outofmemory" in text or "out of memory" in text:
        return "oom"
    if "nccl" in text and ("timeout" in text or "timed out" in text):
        return "nccl_timeout"
    return "exception"


_hasher_lock = threading.Lock()


class _CheckpointHasher:
    """Hashes checkpoint files (SHA-256) on a background thread, off the
    training loop, and sends their `checkpoint` events. Jobs wait in a bounded
    queue; a job that does not fit is dropped and counted. Holds no reference
    to the Emitter (only to its native core).

    Each job holds the emitter's watermark at its event's time (the native
    core's hold_watermark) until the event is in a ring or given up, so that
    no batch sent meanwhile promises past it (docs/sdk.md, "Progress"): a slow
    hash delays the emitter's progress, never makes its checkpoint late."""

    _CHUNK = 1 << 20

    def __init__(self, native, capacity):
        self.native = native
        self.queue = queue.Queue(maxsize=max(1, int(capacity)))
        self.lock = threading.Lock()  # pending/abandoned/counters against close
        self.thread = None
        self.closing = False
        self.abandoned = False
        self.pending = 0
        self.queued = 0
        self.hashed = 0
        self.dropped = 0
        self.errors = 0
        self.holds = set()  # of the jobs not yet sent or given up

    def release(self, hold):
        """Stops holding the watermark for a job (idempotent)."""
        with self.lock:
            if hold not in self.holds:
                return
            self.holds.discard(hold)
        self.native.release_watermark(hold)

    def submit(self, path, fields, hold):
        with self.lock:
            if self.closing:
                self.dropped += 1
                return False
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="runlens-checkpoint-hasher", daemon=True)
                self.thread.start()
            try:
                self.queue.put_nowait((path, fields, hold))
            except queue.Full:
                self.dropped += 1
                return False
            self.holds.add(hold)
            self.pending += 1
            self.queued += 1
        return True

    def _run(self):
        while True:
            try:
                job = self.queue.get(timeout=0.5)
            except queue.Empty:
                if self.closing:  # stop() could not queue its sentinel
                    return
                continue
            if job is None:
                return
            path, fields, hold = job
            try:
                digest, size = self._hash(path)
                fields["sha256"] = digest
                fields.setdefault("size_bytes", size)
                fields.setdefault("ok", True)
                failed = False
            except Exception:  # missing or unreadable: the checkpoint is not usable
                fields["ok"] = False
                failed = True
            with self.lock:
                if self.abandoned:  # close() gave up on it, counted it as dropped and released it
                    continue
                self.pending -= 1
                if failed:
                    self.errors += 1
                else:
                    self.hashed += 1
                try:
                    self.native.emit("checkpoint", fields)
                except Exception:
                    self.errors += 1
            self.release(hold)  # the event is in its ring (or was dropped there, counted)

    def _hash(self, path):
        h = hashlib.sha256()
        size = 0
        buf = bytearray(self._CHUNK)
        view = memoryview(buf)
        with open(path, "rb", buffering=0) as f:
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                if self.abandoned:
                    raise RuntimeError("abandoned at close")
                h.update(view[:n])  # releases the GIL for large buffers
                size += n
        return h.hexdigest(), size

    def stop(self, timeout):
        """Lets the queued jobs finish within `timeout` seconds; what is left
        is dropped and counted. Returns the seconds spent."""
        t0 = time.monotonic()
        with self.lock:
            self.closing = True
            thread = self.thread
        if thread is not None:
            try:
                self.queue.put(None, timeout=max(0.0, timeout))
            except queue.Full:
                pass
            thread.join(max(0.0, timeout - (time.monotonic() - t0)))
        with self.lock:
            if self.pending and not self.abandoned:
                self.abandoned = True
                self.dropped += self.pending
                self.pending = 0
            left = list(self.holds) if self.abandoned else []
        for hold in left:  # what will not be sent holds nothing back
            self.release(hold)
        return time.monotonic() - t0

    def stats(self):
        with self.lock:
            return {
                "checkpoints_queued": self.queued,
                "checkpoints_hashed": self.hashed,
                "checkpoints_dropped": self.dropped,
                "checkpoint_errors": self.errors,
            }


class _State:
    """What the emitter's finalizer needs; kept apart from the Emitter so the
    finalizer holds no reference to it."""

    __slots__ = ("native", "closed", "result", "failed", "reason", "close_timeout", "lock", "hasher")

    def __init__(self, native, close_timeout):
        self.native = native
        self.closed = False
        self.result = False
        self.failed = False
        self.reason = ""
        self.close_timeout = close_timeout
        self.lock = threading.Lock()
        self.hasher = None


def _close_state(state, timeout=None, status=None, reason=None):
    # Held for the whole close, so a second caller waits and gets the result.
    with state.lock:
        if state.closed:
            return state.result
        state.closed = True
        if status is None:
            status = "failed" if state.failed else "completed"
        if reason is None:
            reason = state.reason
        try:
            timeout = state.close_timeout if timeout is None else float(timeout)
            with _hasher_lock:  # against checkpoint_saved creating it right now
                hasher = state.hasher
            if hasher is not None:
                # Queued checkpoints are hashed and sent first, within the timeout.
                timeout = max(0.0, timeout - hasher.stop(timeout))
            state.result = bool(state.native.close(timeout, str(status), str(reason or "")))
        except Exception:
            state.result = False
        return state.result


def _local_gpu_model(gpu):
    """The model name of this host's GPU `gpu`, when torch is already imported
    (never imported here: that is not cheap) and CUDA is available; else None."""
    torch = sys.modules.get("torch")
    if torch is None or gpu is None or int(gpu) < 0:
        return None
    try:
        if not torch.cuda.is_available() or int(gpu) >= torch.cuda.device_count():
            return None
        return str(torch.cuda.get_device_name(int(gpu))) or None
    except Exception:
        return None


def _rank_entries(ranks, node):
    """run_start's ranks as dicts, with gpu_model and node_type filled where this
    process can know them: for the entries on its own node (`node`), the model
    of the local GPU the entry names (torch.cuda.get_device_name) and the
    environment's RUNLENS_NODE_TYPE. What the caller gave is kept."""
    node_type = os.environ.get("RUNLENS_NODE_TYPE") or None
    out = []
    for entry in ranks:
        if isinstance(entry, dict):
            d = dict(entry)
        else:
            t = tuple(entry)
            if len(t) not in (3, 5):
                raise ValueError("ranks: each entry is (rank, node, gpu) or (rank, node, gpu, gpu_model, node_type)")
            d = {"rank": t[0], "node": t[1], "gpu": t[2]}
            if len(t) == 5:
                d["gpu_model"], d["node_type"] = t[3], t[4]
        if node and str(d.get("node", "")) == node:
            if d.get("gpu_model") is None:
                d["gpu_model"] = _local_gpu_model(d.get("gpu"))
            if d.get("node_type") is None:
                d["node_type"] = node_type
        out.append(d)
    return out


class Emitter:
    """Sends this rank's telemetry. See the module docstring and docs/sdk.md.

    Raises ValueError/TypeError only for arguments that are wrong whatever the
    network does (missing run_id, rank outside [0, world_size)); an endpoint
    that cannot be used never raises: stats()["connect_error"] says why and
    every event is dropped and counted.
    """

    def __init__(
        self,
        endpoint=None,
        *,
        run_id,
        rank=0,
        world_size=1,
        node=None,
        gpu=None,
        tenant=None,
        config=None,
        experiment_id=None,
        job_id=None,
        model_id=None,
        model_version=None,
        dataset_version=None,
        code_commit=None,
        gpu_peak_flops=None,
        model_flops_per_token=None,
        ranks=None,
        buffer_capacity=None,
        batch_size=256,
        flush_interval_ms=50.0,
        send_hwm=64,
        close_timeout=2.0,
        checkpoint_queue=64,
        cluster_id=None,
        host_samples=None,
    ):
        if endpoint is None:
            endpoint = os.environ.get("RUNLENS_ENDPOINT", DEFAULT_ENDPOINT)
        if not run_id:
            raise ValueError("runlens.Emitter: run_id is required")
        native = _native.Emitter(
            str(endpoint),
            str(run_id),
            int(rank),
            int(world_size),
            node=str(node or ""),
            gpu=None if gpu is None else int(gpu),
            tenant=str(tenant or ""),
            config=dict(config) if config else None,
            experiment_id=str(experiment_id or ""),
            job_id=str(job_id or ""),
            model_id=str(model_id or ""),
            model_version=str(model_version or ""),
            dataset_version=str(dataset_version or ""),
            code_commit=str(code_commit or ""),
            gpu_peak_flops=gpu_peak_flops,
            model_flops_per_token=model_flops_per_token,
            ranks=_rank_entries(ranks, str(node or "")) if ranks else None,
            buffer_capacity=buffer_capacity,
            batch_size=int(batch_size),
            flush_interval_ms=float(flush_interval_ms),
            send_hwm=int(send_hwm),
            cluster_id=str(cluster_id or ""),
            host_samples=None if host_samples is None else bool(host_samples),
        )
        self.run_id = str(run_id)
        self.rank = int(rank)
        self.world_size = int(world_size)
        self._native = native
        self._state = _State(native, float(close_timeout))
        self._checkpoint_queue = int(checkpoint_queue)
        # Closes with run_end at garbage collection or interpreter exit when
        # close() was never called: "failed" when the last step scope ended in
        # a failure, "completed" otherwise.
        self._finalizer = weakref.finalize(self, _close_state, self._state)
        self._current = None  # innermost open StepScope
        self._observers = []
        self._warned = set()
        self._sdk_errors = 0
        self._unknown_fields = 0

    # --- steps ---------------------------------------------------------------

    def step(self, step, **fields):
        """A context manager that times one training step on this rank and
        sends its `step` event (and `train` event, when train metrics were
        given) when it exits. `fields` preset step or train fields."""
        scope = StepScope(self, step)
        if fields:
            scope.set(**fields)
        return scope

    @property
    def current_step(self):
        """The step number of the innermost open step scope, or None."""
        scope = self._current
        return None if scope is None else scope.step

    # --- events --------------------------------------------------------------

    def emit(self, type, **fields):
        """Send one event of a contract type (step, train, data, collective,
        checkpoint, event) with JSONL-named fields. Returns True when it was
        queued, False when it was dropped; never raises."""
        try:
            known = FIELDS.get(type)
            if known is None:
                self._warn_once(("type", type), f"runlens: unknown event type {type!r}; not sent")
                return False
            if not known.issuperset(fields):
                for name in fields.keys() - known:
                    self._warn_once((type, name), f"runlens: {type} has no field {name!r}; it is not sent")
                    self._unknown_fields += 1
                    del fields[name]
            return self._native.emit(type, fields)
        except Exception:
            self._sdk_errors += 1
            return False

    def event(self, kind, **fields):
        """An `event` (oom, xid, exception, nccl_timeout, abort, restart,
        config_change, ...). step defaults to the open step scope's."""
        if "step" not in fields and self._current is not None:
            fields["step"] = self._current.step
        return self.emit("event", kind=kind, **fields)

    def train(self, step, **fields):
        return self.emit("train", step=step, **fields)

    def data(self, step, **fields):
        return self.emit("data", step=step, **fields)

    def collective(self, step, **fields):
        return self.emit("collective", step=step, **fields)

    def checkpoint(self, **fields):
        return self.emit("checkpoint", **fields)

    def checkpoint_saved(self, path, step=None, *, checkpoint_id=None, **fields):
        """Reports a checkpoint file the job has written. Returns at once: the
        file is hashed (SHA-256) on a background thread, which then sends the
        `checkpoint` event with checkpoint_id (default "RUN_ID/step-STEP"),
        step, uri (file:// URI of the absolute path), sha256, size_bytes and
        ok, plus the given checkpoint fields (duration_ms, upload_ms, ...);
        time_ns is the time of this call, and until the event is sent the
        emitter's batches promise nothing past it. A missing or unreadable file sends
        ok=false without sha256 and is counted in
        stats()["checkpoint_errors"]; a full queue (checkpoint_queue jobs)
        drops the job and counts it in stats()["checkpoints_dropped"].
        Returns True when queued; never raises."""
        hold = 0
        try:
            # Held before anything else: no batch may promise past this call's time.
            hold, t_ns = self._native.hold_watermark()
            path = os.fspath(path)
            if not os.path.isabs(path):
                path = os.path.abspath(path)
            if checkpoint_id is None:
                checkpoint_id = f"{self.run_id}/step-{step}" if step is not None else f"{self.run_id}/{os.path.basename(path)}"
            known = FIELDS["checkpoint"]
            for name in [n for n in fields if n not in known or n in ("checkpoint_id", "sha256")]:
                self._warn_once(("checkpoint_saved", name), f"runlens: checkpoint_saved takes no field {name!r}; it is not sent")
                self._unknown_fields += 1
                del fields[name]
            fields.setdefault("time_ns", t_ns)
            fields.setdefault("uri", "file://" + _uri_path(path))
            fields["checkpoint_id"] = str(checkpoint_id)
            if step is not None:
                fields["step"] = step
            state = self._state
            hasher = state.hasher
            if hasher is None:
                with _hasher_lock:
                    if state.hasher is None:
                        hasher = _CheckpointHasher(self._native, self._checkpoint_queue)
                        # After close() began, jobs are dropped and counted.
                        hasher.closing = state.closed
                        state.hasher = hasher
                    hasher = state.hasher
            if hasher.submit(path, fields, hold):
                return True
            self._native.release_watermark(hold)
            return False
        except Exception:
            self._sdk_errors += 1
            if hold:
                try:
                    self._native.release_watermark(hold)
                except Exception:
                    pass
            return False

    # --- lifecycle -----------------------------------------------------------

    def close(self, timeout=None, status=None, reason=None):
        """Flush within `timeout` seconds (default close_timeout) and stop.
        Rank 0 sends run_end with `status` (default "failed" when the last
        step scope ended in a failure, else "completed") and `reason`.
        Returns True when nothing was dropped at close. Safe to call twice;
        never raises."""
        try:
            self._finalizer.detach()
            return _close_state(self._state, timeout, status, reason)
        except Exception:
            self._sdk_errors += 1
            return False

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if _failure_kind(exc_type, exc) is not None:
            self.close(status="failed", reason=f"{exc_type.__name__}: {exc}")
        else:
            self.close()
        return False

    def stats(self):
        """Counters: emitted and dropped by priority (p0..p3), sent,
        batches_sent, send_retries, send_errors, truncated_texts,
        invalid_fields, unknown_fields, sdk_errors, connect_error, closed."""
        try:
            stats = self._native.stats()
        except Exception:
            stats = {}
        stats["unknown_fields"] = self._unknown_fields
        stats["sdk_errors"] = self._sdk_errors
        hasher = self._state.hasher
        if hasher is not None:
            stats.update(hasher.stats())
        else:
            stats.update(checkpoints_queued=0, checkpoints_hashed=0, checkpoints_dropped=0, checkpoint_errors=0)
        return stats

    # --- for runlens.torch and other integrations ----------------------------

    def add_observer(self, observer):
        """observer.step_begin(scope) and observer.step_end(scope) run at the
        start and end of every step scope, before its events are sent; what
        they raise is caught and counted in stats()["sdk_errors"]."""
        self._observers.append(observer)

    def _warn_once(self, key, message):
        if key in self._warned:
            return
        self._warned.add(key)
        try:
            warnings.warn(message, RuntimeWarning, stacklevel=3)
        except Exception:  # -W error must not turn a typo into a crash
            pass


class _Phase:
    __slots__ = ("_scope", "_name", "_t0")

    def __init__(self, scope, name):
        self._scope = scope
        self._name = name

    def __enter__(self):
        self._t0 = _perf_ns()
        return self

    def __exit__(self, exc_type, exc, tb):
        ms = (_perf_ns() - self._t0) / 1e6
        phases = self._scope.phases
        phases[self._name] = phases.get(self._name, 0.0) + ms
        return False


class StepScope:
    """One training step on this rank (from Emitter.step).

    phases: name -> total milliseconds of s.phase(name) blocks in this step,
    all names, including those that are not sent.
    """

    __slots__ = ("_emitter", "step", "phases", "_step", "_train", "_extra_ms", "_t0", "step_ms", "_previous")

    def __init__(self, emitter, step):
        self._emitter = emitter
        self.step = step
        self.phases = {}
        self._step = {}
        self._train = {}
        self._extra_ms = {}
        self._t0 = None
        self.step_ms = None
        self._previous = None

    def phase(self, name):
        """Times a block. data, forward, backward, optimizer and comm fill
        data_wait_ms, forward_ms, backward_ms, optimizer_ms and comm_ms;
        repeated phases add up."""
        return _Phase(self, name)

    def train(self, **fields):
        """Train metrics of this step (loss, val_loss, lr, grad_norm,
        weight_norm, loss_scale, nan_count, inf_count); tokens, samples,
        seq_len and dataset_shard go on the step event."""
        self._route(fields)

    def set(self, **fields):
        """Step fields (tokens, samples, seq_len, dataset_shard, mem_*, or a
        *_ms to override a timing); train fields go on the train event."""
        self._route(fields)

    def add_ms(self, field, ms):
        """Adds `ms` to a *_ms step field on top of what phases measure
        (runlens.torch adds the all-reduce wait to comm_ms this way)."""
        self._extra_ms[field] = self._extra_ms.get(field, 0.0) + ms

    def _route(self, fields):
        em = self._emitter
        for name, value in fields.items():
            if name in _TRAIN_ONLY:
                self._train[name] = value
            elif name in _STEP_ONLY:
                self._step[name] = value
            else:
                em._unknown_fields += 1
                em._warn_once(("scope", name), f"runlens: a step has no field {name!r}; it is not sent")

    def __enter__(self):
        em = self._emitter
        self._previous = em._current
        em._current = self
        for observer in em._observers:
            try:
                observer.step_begin(self)
            except Exception:
                em._sdk_errors += 1
        self._t0 = _perf_ns()
        return self

    def __exit__(self, exc_type, exc, tb):
        t1 = _perf_ns()
        em = self._emitter
        em._current = self._previous
        try:
            self.step_ms = (t1 - self._t0) / 1e6
            kind = _failure_kind(exc_type, exc)
            if exc_type is not None:
                if kind is not None:
                    # The step did not complete: no step event, a P0 event instead.
                    em._state.failed = True
                    em._state.reason = f"{exc_type.__name__}: {exc}"
                    em.emit("event", kind=kind, step=self.step, message=em._state.reason)
                return False
            for observer in em._observers:
                try:
                    observer.step_end(self)
                except Exception:
                    em._sdk_errors += 1
            fields = {"step_ms": self.step_ms}
            for name, field in PHASE_FIELDS.items():
                ms = self.phases.get(name)
                if ms is not None:
                    fields[field] = ms
            for field, ms in self._extra_ms.items():
                fields[field] = fields.get(field, 0.0) + ms
            fields.update(self._step)  # explicit values win over measured ones
            fields["step"] = self.step
            em._state.failed = False  # a later step completed: the run went on
            # Straight to the native emitter: _route already checked the names.
            em._native.emit("step", fields)
            if self._train:
                train = dict(self._train)
                train["step"] = self.step
                em._native.emit("train", train)
        except Exception:
            em._sdk_errors += 1
        return False
