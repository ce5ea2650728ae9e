"""The portal tests' fixtures (conftest.py imports them):

- `portal_store` (session): one store filled by `runlens replay` of synthetic
  runs with known faults (PORTAL_RUNS below says which, and what each shows).
- `portal` (session): `runlens serve --port 0 --store ...` over it, started
  and stopped by its PID; `portal.url` is the portal's address as printed
  ("portal: http://127.0.0.1:PORT/").
- `chromium` (session): one headless Chromium for the whole session
  (portal_browser.Browser).
- `browser` (each test): that Chromium with its error list cleared; the test
  fails at teardown when the page threw, logged an error or a request failed.
"""

import dataclasses
import os
import pathlib
import re
import subprocess
import threading
import time

import pytest

from portal_browser import BUILD_DIR, Browser

REPO = pathlib.Path(__file__).resolve().parents[2]


def runlens_binary():
    path = BUILD_DIR / "runlens"
    if not path.exists():
        pytest.fail(f"{path} does not exist: build it first (cmake --build build) or set RUNLENS_BUILD_DIR")
    return path


# run id -> `runlens synth` arguments. Each run is replayed on its own (into one store).
# The runs all start at the same event time, so each has its own nodes (--node-prefix), as
# concurrent jobs on a fleet do: GPU and node samples name a node, not a run.
PORTAL_RUNS = {
    # A GPU that throttles thermally from step 100 and turns rank 13 into a straggler
    # (diagnosis: hardware_throttle, owner infrastructure).
    "thermal-13": ["--ranks", "64", "--steps", "300", "--fault", "thermal:rank=13,from=100",
                   "--experiment-id", "exp-pretrain", "--job-id", "job-4821", "--model-version", "v7"],
    # The learning rate raised tenfold at step 170, then NaN at 180; the run fails
    # (diagnosis: config_change, owner training).
    "lr-nan": ["--ranks", "64", "--steps", "300", "--node-prefix", "lrnan-node-", "--fault", "lr_change:step=170,factor=10", "--fault", "nan:step=180",
               "--experiment-id", "exp-pretrain", "--job-id", "job-4822", "--model-version", "v8",
               "--end-status", "failed", "--end-reason", "loss is NaN"],
    # Two runs that differ in their lr and warmup_steps config keys.
    "cmp-a": ["--ranks", "16", "--steps", "120", "--node-prefix", "cmpa-node-", "--experiment-id", "exp-lr", "--model-version", "v9",
              "--config", "lr=0.0003", "--config", "warmup_steps=100"],
    "cmp-b": ["--ranks", "16", "--steps", "120", "--node-prefix", "cmpb-node-", "--experiment-id", "exp-lr", "--model-version", "v10",
              "--config", "lr=0.0006", "--config", "warmup_steps=500"],
    # 1024 ranks, a short run, rank 700 a straggler from step 20: the heatmap's scale.
    "wide-1024": ["--ranks", "1024", "--steps", "60", "--node-prefix", "wide-node-", "--fault", "straggler:rank=700,from=20",
                  "--experiment-id", "exp-scale", "--model-id", "llama-x-70b", "--model-version", "v1"],
}


@dataclasses.dataclass
class PortalStore:
    path: pathlib.Path  # the SQLite file
    url: str  # sqlite:///ABSOLUTE/PATH
    runs: dict  # run id -> synth arguments


@dataclasses.dataclass
class Portal:
    url: str  # http://127.0.0.1:PORT/ (as `runlens serve` printed it)
    store: PortalStore
    proc: subprocess.Popen

    def at(self, hash_route):
        """The portal's URL of a hash route: portal.at('#/runs/lr-nan')."""
        return self.url + hash_route


def _run(args, cwd, timeout=60):
    r = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} exited with {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@pytest.fixture(scope="session")
def portal_store(tmp_path_factory):
    binary = runlens_binary()
    tmp = tmp_path_factory.mktemp("portal-store")
    db = tmp / "portal.db"
    url = f"sqlite://{db}"  # db is absolute: sqlite:///...
    # synth is fast and independent: all at once; replays one after another (one writer).
    procs = {}
    for run_id, args in PORTAL_RUNS.items():
        procs[run_id] = subprocess.Popen(
            [str(binary), "synth", "--run-id", run_id, *args, "--out", str(tmp / f"{run_id}.rlrec")],
            cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
    for run_id, p in procs.items():
        out, _ = p.communicate(timeout=60)
        if p.returncode != 0:
            pytest.fail(f"runlens synth of {run_id} exited with {p.returncode}:\n{out}")
    for run_id in PORTAL_RUNS:
        _run([binary, "replay", tmp / f"{run_id}.rlrec", "--store", url, "--out", tmp / f"out-{run_id}", "--quiet"], cwd=tmp)
    return PortalStore(path=db, url=url, runs=PORTAL_RUNS)


def start_serve(store_url, cwd, timeout=20.0):
    """`runlens serve --port 0` over a store: (process, portal URL, its stderr lines)."""
    proc = subprocess.Popen(
        [str(runlens_binary()), "serve", "--port", "0", "--store", store_url, "--workers", "tcp://127.0.0.1:0"],
        cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    lines = []
    found = threading.Event()
    url = []

    def read():
        for line in proc.stderr:
            lines.append(line)
            m = re.match(r"portal: (http://127\.0\.0\.1:\d+/)$", line.strip())
            if m and not url:
                url.append(m.group(1))
                found.set()

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not found.wait(0.05):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process(proc)
            pytest.fail(f"runlens serve printed no portal URL (exit {proc.returncode}):\n{''.join(lines)}")
    return proc, url[0], lines


def stop_process(proc):
    if proc.poll() is not None:
        return
    proc.send_signal(2)  # SIGINT: runlens serve stops on Ctrl-C
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def portal(portal_store, tmp_path_factory):
    proc, url, _ = start_serve(portal_store.url, tmp_path_factory.mktemp("portal-serve"))
    try:
        yield Portal(url=url, store=portal_store, proc=proc)
    finally:
        stop_process(proc)


@pytest.fixture(scope="session")
def chromium():
    b = Browser.start()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def browser(chromium):
    chromium.clear_errors()
    yield chromium
    chromium.drain(0.1)
    errors = list(chromium.errors)
    chromium.clear_errors()
    assert errors == [], "the page reported errors:\n" + "\n".join(errors)
