"""What the benchmark scripts share about the processes they start: waiting for
a line in a process's log, stopping it (SIGINT, then SIGKILL), and a subscriber
on its alert stream."""

import json
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import zmq


def wait_for(path: pathlib.Path, pattern: str, proc: subprocess.Popen, timeout: float, who: str) -> re.Match:
    """The first match of `pattern` in the log at `path`; exits naming `who` if the process ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, path.read_text(errors="replace"))
        if m:
            return m
        if proc.poll() is not None:
            sys.exit(f"{who}: {' '.join(map(str, proc.args[:2]))} exited:\n{path.read_text()}")
        time.sleep(0.02)
    sys.exit(f"{who}: timed out waiting for /{pattern}/ in {path}")


def stop(proc: subprocess.Popen, timeout: float = 15) -> None:
    """SIGINT (runlens stops cleanly on it), then SIGKILL after `timeout` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Subscriber:
    """A SUB on a runlens alert stream (a thread) that stamps every alert's receipt (time.time_ns())."""

    def __init__(self, endpoint):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.SUB)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)
        self.alerts = []  # (receipt wall ns, alert)
        self.stop = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while not self.stop:
            if not poller.poll(50):
                continue
            while True:
                try:
                    parts = self.sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                self.alerts.append((time.time_ns(), json.loads(parts[-1])))

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()
        self.ctx.term()
