"""A live run's page updates without a reload: `runlens run --api-port 0`
fed by `runlens send` at a paced rate; the Run page, opened while the run is
running, shows its step advance (cards and plots) with the same document."""

import json
import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from portal_fixtures import runlens_binary, stop_process


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_running_run_advances_on_its_page_without_reload(tmp_path, browser):
    binary = str(runlens_binary())
    rec = tmp_path / "live.jsonl"  # JSONL: send frames it in batches, paced (a recording is one frame)
    subprocess.run([binary, "synth", "--run-id", "live-1", "--ranks", "8", "--steps", "400", "--gpu-every", "20",
                    "--out", str(rec)], check=True, capture_output=True, timeout=30)
    listen = f"tcp://127.0.0.1:{free_port()}"
    run = subprocess.Popen(
        [binary, "run", "--api-port", "0", "--threads", "2", "--out", str(tmp_path / "out"),
         "--store", f"sqlite://{tmp_path}/live.db", "--set", f"RUNLENS_LISTEN={listen}",
         "--set", f"RUNLENS_PUBLISH=ipc://{tmp_path}/pub"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    send = None
    lines = []
    try:
        url = []
        got = threading.Event()

        def read():
            for line in run.stderr:
                lines.append(line)
                m = re.match(r"portal: (http://127\.0\.0\.1:\d+/)$", line.strip())
                if m:
                    url.append(m.group(1))
                    got.set()

        threading.Thread(target=read, daemon=True).start()
        if not got.wait(15):
            pytest.fail("runlens run printed no portal URL:\n" + "".join(lines))
        # ~9.5 events a step: about 30 steps a second, the run lasts ~12 s, longer than the test needs.
        send = subprocess.Popen([binary, "send", str(rec), "--to", listen, "--rate", "300", "--batch", "16", "--linger", "0"],
                                cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = url[0]
        step_of = "Number((document.querySelector('[data-testid=progress-step] .value') || {}).textContent?.replace(/,/g, '') || 0)"
        # The run exists once its first steps are in the store (asked over HTTP, so the page never sees a 404).
        deadline = time.monotonic() + 15
        while True:
            try:
                with urllib.request.urlopen(base + "v1/runs/live-1/steps?limit=1", timeout=5) as r:
                    if json.load(r)["steps"]:
                        break
            except urllib.error.HTTPError as e:
                if e.code not in (404, 503):  # no run yet; no store yet
                    raise
            if time.monotonic() > deadline:
                pytest.fail("the live run never reached the store:\n" + "".join(lines))
            time.sleep(0.2)
        browser.goto(base + "#/runs/live-1")
        browser.wait(f"{step_of} > 0")
        assert browser.text("#run-tabs [data-testid=status]") == "RUNNING"
        first = browser.eval(step_of)
        first_plot = browser.attr("[data-testid=chart-loss]", "aria-label")
        browser.eval("window.__sameDocument = true")
        browser.wait(f"{step_of} > {first}", timeout=10)
        browser.wait(f"document.querySelector('[data-testid=chart-loss]').getAttribute('aria-label') !== {first_plot!r}", timeout=5)
        assert browser.eval("window.__sameDocument === true"), "the page reloaded"
        browser.screenshot("run-live")
    finally:
        browser.blank()  # the page polls: leave it before its server goes
        if send is not None:
            stop_process(send)
        stop_process(run)
