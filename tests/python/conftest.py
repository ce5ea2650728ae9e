"""Shared fixtures of the SDK tests.

The tests import the built package: RUNLENS_BUILD_DIR (default `build`,
relative to the repository root unless absolute) must hold python/runlens,
which `cmake --build` puts there. They fail, rather than skip, when it is
missing, so a CI run without the module cannot pass by testing nothing.
"""

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD_DIR = pathlib.Path(os.environ.get("RUNLENS_BUILD_DIR", "build"))
if not BUILD_DIR.is_absolute():
    BUILD_DIR = REPO / BUILD_DIR
PYTHON_DIR = BUILD_DIR / "python"

# The SDK's host samples (docs/sdk.md, "Host samples") carry this machine's
# real load: off for every test and the processes they start, whose event
# counts and alerts must not depend on it. A test of them turns them on.
os.environ["RUNLENS_HOST_SAMPLES"] = "0"
os.environ.pop("RUNLENS_NODE_TYPE", None)  # run_start's node_type only where a test sets it

if not (PYTHON_DIR / "runlens" / "__init__.py").exists():
    raise RuntimeError(
        f"runlens Python package not found in {PYTHON_DIR}: build it first "
        "(cmake -S . -B build && cmake --build build) or set RUNLENS_BUILD_DIR"
    )
sys.path.insert(0, str(PYTHON_DIR))

import zmq  # noqa: E402

import runlens  # noqa: E402


class Collector:
    """A real ZeroMQ PULL socket standing in for the runlens collector."""

    def __init__(self, port=None):
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.PULL)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.RCVHWM, 0)  # never push back on the SDK in tests
        if port is None:
            port = self.socket.bind_to_random_port("tcp://127.0.0.1")
        else:
            self.socket.bind(f"tcp://127.0.0.1:{port}")
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self.events = []

    def collect(self, until=None, timeout=30.0):
        """Receive until `until(events)` holds or `timeout` seconds pass (then
        whatever arrived); without `until`, until 0.5 s pass with nothing new."""
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            if until is not None and until(self.events):
                break
            if self.socket.poll(100):
                self.events.extend(runlens.decode_batch(self.socket.recv()))
                quiet_since = time.monotonic()
            elif until is None and time.monotonic() - quiet_since > 0.5:
                break
        return self.events

    def of_type(self, kind):
        return [e for e in self.events if e["type"] == kind]

    def close(self):
        self.socket.close(linger=0)
        self.context.term()


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()


def free_tcp_port():
    """A loopback port nothing listens on (right now)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_binary(name, package):
    """A server a test starts (Debian's `package`): on PATH, else in /usr/bin; the test fails when it is
    missing (the README's test command installs it)."""
    path = shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)
    if path is None:
        pytest.fail(f"{name} is not installed (Debian package {package}; tools/dev test installs it)")
    return path


def stop(proc):
    """Stops one process a test started, by its PID (SIGINT, then SIGKILL if it lingers)."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_until(cond, timeout, what, log_path):
    """cond()'s first truthy answer, polled every 50 ms; fails with `what` and the log's tail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout} s; log {log_path}:\n{pathlib.Path(log_path).read_text()[-3000:]}")


@pytest.fixture
def dead_endpoint():
    return f"tcp://127.0.0.1:{free_tcp_port()}"


def has_run_end(events):
    return any(e["type"] == "run_end" for e in events)


def python_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PYTHON_DIR), env.get("PYTHONPATH")) if p)
    return env


def run_script(args, timeout):
    """Runs a Python script in its own process group, so that on timeout the
    workers it spawned are killed with it. Returns CompletedProcess."""
    proc = subprocess.Popen(
        [sys.executable, *map(str, args)],
        env=python_env(),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{args[0]} did not finish in {timeout} s:\n{out}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, None)


# The portal's browser tests (tests/python/test_portal_*.py): the store, `runlens serve` and Chromium.
from portal_fixtures import browser, chromium, portal, portal_store  # noqa: E402,F401
