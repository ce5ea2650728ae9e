"""The processes of a local runlens deployment, for the examples and tests:
a live pipeline (`runlens run`) and the evaluation service (`runlens serve`)
on one SQLite store, and evaluation worker processes, all on loopback ports
chosen at run time. Every process started is stopped by its PID by stop()
(SIGINT, then SIGKILL after a grace period), also when starting fails.

    with Stack(out_dir, runlens_binary, workers=2, gates=ROOT / "configs/gates") as st:
        st.api        # http://127.0.0.1:PORT
        st.ingest     # tcp://127.0.0.1:PORT: the SDK's endpoint
        st.http("GET", "/v1/evaluations")
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent


class StackError(RuntimeError):
    """A process of the stack did not start, or a wait timed out."""


class HttpError(RuntimeError):
    def __init__(self, method, url, code, body):
        super().__init__(f"{method} {url}: {code} {body}")
        self.code = code
        self.body = body
        try:
            self.json = json.loads(body)
        except ValueError:
            self.json = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_line(path: pathlib.Path, pattern: str, proc: subprocess.Popen, timeout: float = 60.0) -> re.Match:
    """The first match of `pattern` in the log file `path`; StackError when
    `proc` exits first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        m = re.search(pattern, text)
        if m:
            return m
        if proc.poll() is not None:
            raise StackError(f"{proc.args[0]} {proc.args[1]} exited ({proc.returncode}):\n{text}")
        time.sleep(0.05)
    raise StackError(f"timed out waiting for /{pattern}/ in {path}")


def http_json(url: str, body=None, method=None, headers=None, timeout=30):
    """JSON in and out; an HTTP error status raises HttpError (code, body, json)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method or ("GET" if body is None else "POST"),
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise HttpError(req.method, url, e.code, e.read().decode(errors="replace")) from None


def python_env(runlens: str) -> dict:
    """The environment with the built Python package (next to the binary) first on PYTHONPATH."""
    py = str(pathlib.Path(runlens).resolve().parent / "python")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [py, os.environ.get("PYTHONPATH")])))


class Stack:
    def __init__(self, out: pathlib.Path, runlens: str, *, workers: int = 2, suites=None, gates=None,
                 python_workers: bool = False, worker_prefix: str = "w", pipeline: bool = True, serve_args=()):
        """Starts the stack in `out` (store out/runlens.db, logs out/logs).
        `workers` evaluation workers (`runlens eval worker`, or with
        python_workers `python3 -m runlens.eval.worker`); `suites` and
        `gates` are passed to serve (default: the source tree's), and
        `serve_args` after them."""
        self.out = pathlib.Path(out).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.logs = self.out / "logs"
        self.logs.mkdir(exist_ok=True)
        self.runlens = str(runlens)
        self.db = self.out / "runlens.db"
        self.store = f"sqlite://{self.db}"
        self.ingest = f"tcp://127.0.0.1:{free_port()}"
        self.env = python_env(self.runlens)
        self.procs: list[subprocess.Popen] = []
        self._files = []
        try:
            self._start(workers, suites, gates, python_workers, worker_prefix, pipeline, list(serve_args))
        except BaseException:
            self.stop()
            raise

    def start(self, name: str, argv: list) -> tuple:
        log = self.logs / f"{name}.log"
        f = open(log, "w")
        self._files.append(f)
        proc = subprocess.Popen([str(a) for a in argv], stdout=f, stderr=subprocess.STDOUT, env=self.env)
        self.procs.append(proc)
        return proc, log

    def _start(self, workers, suites, gates, python_workers, worker_prefix, pipeline, serve_args):
        if pipeline:
            run, run_log = self.start("run", [self.runlens, "run", "--out", self.out / "pipeline", "--store",
                                              self.store, "--set", f"RUNLENS_LISTEN={self.ingest}", "--set",
                                              f"RUNLENS_PUBLISH=tcp://127.0.0.1:{free_port()}"])
            deadline = time.monotonic() + 60
            while not self.db.exists():  # the pipeline creates the store as it starts
                if run.poll() is not None or time.monotonic() > deadline:
                    raise StackError(f"runlens run did not start:\n{run_log.read_text()}")
                time.sleep(0.05)
        else:
            self.db.touch()  # an empty SQLite file: the service creates its tables
        args = [self.runlens, "serve", "--store", self.store, "--port", "0", "--workers", "tcp://127.0.0.1:0"]
        for s in ([suites] if isinstance(suites, (str, pathlib.Path)) else suites or [ROOT / "configs" / "eval"]):
            args += ["--suites", s]
        for g in ([gates] if isinstance(gates, (str, pathlib.Path)) else gates or []):
            args += ["--gates", g]
        args += serve_args
        self.serve, self.serve_log = self.start("serve", args)
        self.api = "http://127.0.0.1:" + wait_for_line(self.serve_log, r"on http://127\.0\.0\.1:(\d+)/v1/",
                                                       self.serve).group(1)
        self.workers_endpoint = wait_for_line(self.serve_log, r"workers connect to (tcp://\S+)", self.serve).group(1)
        self.worker_ids = [f"{worker_prefix}{i + 1}" for i in range(workers)]
        for wid in self.worker_ids:
            cmd = ([sys.executable if sys.executable else "/usr/bin/python3", "-m", "runlens.eval.worker"]
                   if python_workers else [self.runlens, "eval", "worker"])
            self.start(f"worker-{wid}", [*cmd, "--connect", self.workers_endpoint, "--id", wid])

    def http(self, method: str, path: str, body=None, headers=None):
        return http_json(self.api + path, body, method, headers)

    def cli(self, *args, check=True, timeout=60) -> subprocess.CompletedProcess:
        """`runlens ARGS` with its output captured (text)."""
        r = subprocess.run([self.runlens, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                           env=self.env)
        if check and r.returncode != 0:
            raise StackError(f"runlens {' '.join(map(str, args))} exited {r.returncode}:\n{r.stdout}{r.stderr}")
        return r

    def wait(self, cond, timeout: float, what: str):
        """Polls cond() until it returns something true; StackError naming
        `what` (and the service log's tail) after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            got = cond()
            if got:
                return got
            if time.monotonic() > deadline:
                tail = self.serve_log.read_text(errors="replace")[-3000:]
                raise StackError(f"{what} within {timeout:.0f} s (logs in {self.logs}); serve log:\n{tail}")
            time.sleep(0.1)

    def stop(self, grace: float = 15.0):
        """Stops every process started, by PID: SIGINT, then SIGKILL."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGINT)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        for f in self._files:
            f.close()
        self._files = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
