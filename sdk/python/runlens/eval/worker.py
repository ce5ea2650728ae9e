"""The Python evaluation worker: runs shards of the evaluation service.

    /usr/bin/python3 -m runlens.eval.worker --connect tcp://127.0.0.1:5571 \
        [--id W] [--slots 1] [--memory 4GiB] [--pool cpu]

It speaks the worker protocol (docs/eval-protocol.md) over one ZeroMQ DEALER
socket: `hello`, a `heartbeat` every heartbeatMs, `result` or `fail` per
assignment, `hello` again on `reregister`, `bye` on SIGTERM or SIGINT.

Threads: the main thread owns the socket (pyzmq sockets are not thread-safe)
and does all sending and receiving; each assignment is computed in a thread
of its own that hands its outcome back through a queue, so heartbeats go out
on time however long a shard takes. A message the worker cannot use (not
JSON, an unknown type, a malformed assignment) is logged and, where it names
an assignment, answered with `fail`; it never stops the worker.

Before running an assignment the worker checks the checkpoint file's SHA-256
and the dataset file's SHA-256 against the assignment (a mismatch or a
missing file: `fail` with retryable false). Loaded checkpoints stay in memory
(the few most recently used) and are reported in every heartbeat's `loaded`.
The evaluators are runlens.eval.evaluators.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import queue
import re
import signal
import socket as _socket
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

from . import evaluators as _ev

PROTOCOL = 1
WORKER_VERSION = "runlens-eval-worker-py/1"
MAX_LOADED = 4  # checkpoints kept in memory


def parse_memory_mib(text: str) -> Optional[int]:
    """"4GiB", "512MiB", "1.5GB", "800MB" -> MiB (eval/suite.h parse_memory_mib)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(GiB|GB|MiB|MB)\s*", text)
    if not m:
        return None
    value = float(m.group(1)) * (1024 if m.group(2) in ("GiB", "GB") else 1)
    return int(round(value)) if value >= 1 else None


def code_commit() -> str:
    env = os.environ.get("RUNLENS_CODE_COMMIT")
    if env:
        return env
    try:
        out = subprocess.run(
            ["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        sha = out.stdout.strip()
        return sha if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", sha) else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def libraries() -> Dict[str, str]:
    libs = {"python": platform.python_version()}
    for name in ("torch", "numpy", "zmq"):
        try:
            mod = __import__(name)
            libs["pyzmq" if name == "zmq" else name] = str(getattr(mod, "__version__", "unknown"))
        except ImportError:
            pass
    return libs


def log(worker: str, text: str) -> None:
    sys.stderr.write(f"runlens-eval-worker {worker}: {text}\n")
    sys.stderr.flush()


class Runner:
    """Runs assignments: verifies the files, loads (and caches) checkpoints,
    calls the evaluator. Thread-safe: assignments may run at once."""

    def __init__(self, provenance: Dict[str, Any]):
        self.provenance = provenance
        self._lock = threading.Lock()
        self._models: "collections.OrderedDict[str, tuple]" = collections.OrderedDict()  # id -> (sha256, model)
        self._hashes: Dict[tuple, str] = {}  # (path, size, mtime_ns) -> sha256

    def loaded(self) -> List[str]:
        with self._lock:
            return list(self._models)

    def _file_sha256(self, path: str) -> str:
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns)
        with self._lock:
            if key in self._hashes:
                return self._hashes[key]
        digest = _ev.sha256_file(path)
        with self._lock:
            self._hashes[key] = digest
        return digest

    def _verify(self, what: str, path: str, expected: str) -> None:
        if not os.path.isfile(path):
            raise _ev.EvaluationFailure(f"{what}: file {path} does not exist", False)
        try:
            actual = self._file_sha256(path)
        except OSError as exc:
            raise _ev.EvaluationFailure(f"{what}: cannot read {path}: {exc.strerror}", False) from None
        if actual != expected.lower():
            raise _ev.EvaluationFailure(f"{what}: SHA-256 of {path} is {actual}, expected {expected}", False)

    def model(self, a: _ev.Assignment):
        with self._lock:
            hit = self._models.get(a.checkpoint_id)
            if hit and hit[0] == a.checkpoint_sha256.lower() and hit[2] == a.evaluator:
                self._models.move_to_end(a.checkpoint_id)
                return hit[1]
        path = _ev.checkpoint_path(a.checkpoint_uri)
        self._verify(f"checkpoint {a.checkpoint_id}", path, a.checkpoint_sha256)
        model = _ev.load_model(path, a.evaluator)
        with self._lock:
            self._models[a.checkpoint_id] = (a.checkpoint_sha256.lower(), model, a.evaluator)
            self._models.move_to_end(a.checkpoint_id)
            while len(self._models) > MAX_LOADED:
                self._models.popitem(last=False)
        return model

    def run(self, a: _ev.Assignment) -> List[_ev.ItemResult]:
        if a.evaluator not in _ev.EVALUATORS:
            raise _ev.EvaluationFailure(
                f"this worker has no evaluator {a.evaluator} (it has {', '.join(_ev.EVALUATORS)})", True
            )
        self._verify(f"dataset {a.dataset_id} version {a.dataset_version}", a.dataset_path, a.dataset_sha256)
        return _ev.evaluate(a, self.model(a))

    def outcome(self, a: _ev.Assignment, worker: str) -> Dict[str, Any]:
        """The `result` or `fail` message for an assignment."""
        head = {"worker": worker, "evaluationId": a.evaluation_id, "shard": a.shard, "attempt": a.attempt}
        try:
            items = self.run(a)
        except _ev.EvaluationFailure as exc:
            return {"type": "fail", **head, "reason": exc.reason, "retryable": exc.retryable}
        except Exception as exc:  # the model or the evaluator crashed: another attempt may succeed
            return {"type": "fail", **head, "reason": f"evaluator crashed: {type(exc).__name__}: {exc}", "retryable": True}
        prov = dict(self.provenance)
        prov["evaluator"] = a.evaluator
        return {"type": "result", **head, "items": [r.to_json() for r in items], "provenance": prov}


class Worker:
    def __init__(self, endpoint: str, worker_id: str, slots: int, memory_mib: int, pool: str):
        self.endpoint = endpoint
        self.id = worker_id
        self.slots = slots
        self.memory_mib = memory_mib
        self.pool = pool
        self.heartbeat_s = 1.0
        self.welcomed = False
        self.stop = threading.Event()
        self.done: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self.busy = 0
        libs = libraries()
        self.hello_msg = {
            "type": "hello",
            "protocol": PROTOCOL,
            "worker": worker_id,
            "pool": pool,
            "memoryMib": memory_mib,
            "slots": slots,
            "workerVersion": WORKER_VERSION,
            "codeCommit": code_commit(),
            "libraries": libs,
            "evaluators": list(_ev.EVALUATORS),
        }
        self.runner = Runner({"workerVersion": WORKER_VERSION, "codeCommit": self.hello_msg["codeCommit"], "libraries": libs})

    def _send(self, sock, msg: Dict[str, Any]) -> None:
        sock.send(json.dumps(msg, allow_nan=False, separators=(",", ":")).encode("utf-8"))

    def _hello(self, sock) -> None:
        self._send(sock, self.hello_msg)
        self.last_hello = time.monotonic()

    def _assign(self, sock, msg: Dict[str, Any]) -> None:
        try:
            a = _ev.parse_assignment(msg)
        except ValueError as exc:
            log(self.id, f"malformed assign ignored: {exc}")
            ids = {k: msg.get(k) for k in ("evaluationId", "shard", "attempt")}
            if isinstance(ids["evaluationId"], str) and all(isinstance(ids[k], int) for k in ("shard", "attempt")):
                self._send(sock, {"type": "fail", "worker": self.id, **ids, "reason": f"malformed assignment: {exc}", "retryable": False})
            return
        self.busy += 1
        log(self.id, f"shard {a.shard} of {a.evaluation_id} (attempt {a.attempt}, items [{a.begin}, {a.end}))")

        def compute():
            self.done.put(self.runner.outcome(a, self.id))

        threading.Thread(target=compute, name=f"shard-{a.shard}", daemon=True).start()

    def _handle(self, sock, raw: bytes) -> None:
        try:
            msg = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            log(self.id, f"ignored a message that is not JSON ({exc}): {raw[:80]!r}")
            return
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            log(self.id, f"ignored a message without a type: {raw[:80]!r}")
            return
        kind = msg["type"]
        if kind == "welcome":
            self.welcomed = True
            hb = msg.get("heartbeatMs")
            if isinstance(hb, (int, float)) and not isinstance(hb, bool) and 10 <= hb <= 600_000:
                self.heartbeat_s = hb / 1000.0
            log(self.id, f"welcomed by {self.endpoint} (heartbeat every {self.heartbeat_s * 1000:.0f} ms)")
        elif kind == "assign":
            self._assign(sock, msg)
        elif kind == "reregister":
            log(self.id, f"service asks to register again: {msg.get('reason', '')}")
            self.welcomed = False
            self._hello(sock)
        elif kind == "ack":
            if msg.get("outcome") != "accepted":
                log(self.id, f"shard {msg.get('shard')} of {msg.get('evaluationId')}: {msg.get('outcome')}: {msg.get('reason', '')}")
        elif kind == "error":
            log(self.id, f"service error about {msg.get('about')}: {msg.get('error')}")
        else:
            log(self.id, f"ignored a message of unknown type {kind!r}")

    def run(self) -> int:
        import zmq

        ctx = zmq.Context()
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 2000)
        sock.connect(self.endpoint)
        log(self.id, f"connecting to {self.endpoint}")
        self._hello(sock)
        next_beat = time.monotonic() + self.heartbeat_s
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        try:
            while not self.stop.is_set():
                timeout = max(0.0, min(next_beat - time.monotonic(), 0.02 if self.busy else 0.2))
                try:
                    ready = dict(poller.poll(timeout * 1000))
                except zmq.ZMQError as exc:
                    if exc.errno == zmq.EINTR:
                        continue
                    raise
                if sock in ready:
                    while True:
                        try:
                            raw = sock.recv(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        self._handle(sock, raw)
                while True:
                    try:
                        out = self.done.get_nowait()
                    except queue.Empty:
                        break
                    self.busy -= 1
                    if out["type"] == "fail":
                        log(self.id, f"shard {out['shard']} of {out['evaluationId']} failed: {out['reason']}")
                    self._send(sock, out)
                now = time.monotonic()
                if now >= next_beat:
                    if self.welcomed:
                        self._send(sock, {"type": "heartbeat", "worker": self.id, "loaded": self.runner.loaded()})
                    elif now - self.last_hello >= 2.0:
                        self._hello(sock)  # the service was not there yet (ZeroMQ keeps the first one queued too)
                    next_beat = now + self.heartbeat_s
            self._send(sock, {"type": "bye", "worker": self.id})
            log(self.id, "bye")
        finally:
            sock.close()
            ctx.term()
        return 0


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m runlens.eval.worker", description="A runlens evaluation worker.")
    p.add_argument("--connect", required=True, help="the service's worker endpoint, e.g. tcp://127.0.0.1:5571")
    p.add_argument("--id", default=f"{_socket.gethostname()}-{os.getpid()}", help="worker id (default HOST-PID)")
    p.add_argument("--slots", type=int, default=1, help="shards computed at once (default 1)")
    p.add_argument("--memory", default="4GiB", help="memory offered to models, e.g. 4GiB or 512MiB (default 4GiB)")
    p.add_argument("--pool", default="cpu", choices=("cpu", "gpu"), help="worker pool (default cpu)")
    args = p.parse_args(argv)
    memory = parse_memory_mib(args.memory)
    if memory is None:
        p.error(f"--memory: expected a size like 4GiB or 512MiB, got {args.memory!r}")
    if not 1 <= args.slots <= 256:
        p.error(f"--slots: expected 1 to 256, got {args.slots}")
    if not re.fullmatch(r"[A-Za-z0-9._:@-]{1,128}", args.id):
        p.error(f"--id: expected 1 to 128 letters, digits or ._:@-, got {args.id!r}")
    if not re.fullmatch(r"(tcp|ipc|inproc)://.+", args.connect):
        p.error(f"--connect: expected a ZeroMQ endpoint such as tcp://127.0.0.1:5571, got {args.connect!r}")
    worker = Worker(args.connect, args.id, args.slots, memory, args.pool)

    def on_signal(signum, frame):
        worker.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    rc = worker.run()
    sys.stdout.flush()
    os._exit(rc)  # shard threads still computing (daemons) are abandoned: their leases were handed back by bye


if __name__ == "__main__":
    sys.exit(main())
