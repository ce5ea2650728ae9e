"""What the benchmark scripts share about the processes they start: waiting for
a line in a process's log, and stopping it (SIGINT, then SIGKILL)."""

import pathlib
import re
import signal
import subprocess
import sys
import time


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
