"""A real node_exporter (Debian's prometheus-node-exporter), started by the
test, scraped live by `runlens run` (the default pipeline's prometheus_scrape
source, docs/integrations.md) while SDK emitters report two ranks placed on
the node it is mapped to: busy loops saturate the CPUs while the ranks wait
for data, and the node's CPU reaches host_bottleneck and the diagnosis of
those ranks. Fails, not skips, when node_exporter is missing (CI installs it)."""

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import BUILD_DIR, free_tcp_port, server_binary, stop

import runlens

RUNLENS = BUILD_DIR / "runlens"
NODE = "node-live"


def node_exporter_binary():
    return server_binary("prometheus-node-exporter", "prometheus-node-exporter")


def start_node_exporter(tmp_path):
    for _ in range(3):
        port = free_tcp_port()
        proc = subprocess.Popen(
            [node_exporter_binary(), f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
             "--collector.cpu", "--collector.meminfo", "--collector.loadavg", "--collector.netdev",
             "--collector.netstat", "--collector.diskstats"],
            stdout=open(tmp_path / "node_exporter.log", "w"), stderr=subprocess.STDOUT, cwd=tmp_path)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
                    if b"node_cpu_seconds_total" in r.read():
                        return proc, port
            except OSError:
                time.sleep(0.05)
        stop(proc)
    pytest.fail("node_exporter did not start:\n" + (tmp_path / "node_exporter.log").read_text())


def test_node_exporter_cpu_reaches_host_bottleneck_and_the_diagnosis(tmp_path):
    assert RUNLENS.exists(), f"{RUNLENS} not built"
    started = time.monotonic()
    exporter = engine = None
    busy = []
    try:
        exporter, port = start_node_exporter(tmp_path)
        target = f"127.0.0.1:{port}"
        for _ in range(3):
            listen = f"tcp://127.0.0.1:{free_tcp_port()}"
            engine = subprocess.Popen(
                [str(RUNLENS), "run", "--out", str(tmp_path / "out"), "--quiet", "--threads", "2",
                 "--set", f"RUNLENS_LISTEN={listen}", "--set", f"RUNLENS_PUBLISH=tcp://127.0.0.1:{free_tcp_port()}",
                 "--set", f"RUNLENS_SCRAPE={target}", "--set", f"RUNLENS_SCRAPE_NODES={target}={NODE}",
                 "--set", "RUNLENS_SCRAPE_INTERVAL=500ms"],
                stdout=open(tmp_path / "run.log", "w"), stderr=subprocess.STDOUT)
            time.sleep(0.7)
            if engine.poll() is None:
                break
        assert engine.poll() is None, (tmp_path / "run.log").read_text()

        # Every CPU busy (the machine's own load only adds to it).
        for _ in range(os.cpu_count() or 2):
            busy.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        time.sleep(1.2)  # two scrapes: the first CPU rate

        ranks = [{"rank": r, "node": NODE, "gpu": r} for r in range(2)]
        emitters = [runlens.Emitter(listen, run_id="scrape-live", rank=r, world_size=2, node=NODE, gpu=r,
                                    ranks=ranks, flush_interval_ms=20) for r in range(2)]
        for step in range(40):
            for em in emitters:
                em.emit("step", step=step, step_ms=100.0, data_wait_ms=45.0, forward_ms=20.0, backward_ms=30.0)
            time.sleep(0.1)
        for em in emitters:
            em.close()
        time.sleep(1.0)
    finally:
        for p in busy:
            p.kill()
            p.wait()
        stop(engine)
        stop(exporter)
    assert engine.returncode == 0, (tmp_path / "run.log").read_text()

    alerts = [json.loads(line) for line in (tmp_path / "out" / "alerts.jsonl").read_text().splitlines()]
    hosts = [a for a in alerts if a["kind"] == "host_bottleneck"]
    assert hosts, [(a["kind"], a.get("summary")) for a in alerts]
    h = hosts[0]
    assert h["node"] == NODE and h["run_id"] == "scrape-live"
    assert h["attrs"]["cpu_pct"] >= 90, h
    assert h["attrs"]["node_ranks"] == 2 and h["attrs"]["data_wait_ratio"] == pytest.approx(0.45), h

    diagnoses = [a for a in alerts if a["kind"] == "diagnosis" and a["run_id"] == "scrape-live"]
    assert diagnoses, [(a["kind"], a.get("summary")) for a in alerts]
    last = {}
    for d in diagnoses:  # the highest revision of each incident
        if d["alert_id"] not in last or d["revision"] > last[d["alert_id"]]["revision"]:
            last[d["alert_id"]] = d
    causes = {d["cause"] for d in last.values()}
    assert "host_bottleneck" in causes, list(last.values())
    d = next(d for d in last.values() if d["cause"] == "host_bottleneck")
    assert d["node"] == NODE and d["owner"] == "infrastructure", d
    host_evidence = [e for e in d["evidence"] if e["kind"] == "host_bottleneck"]
    assert host_evidence and f"node {NODE} CPU at" in host_evidence[0]["detail"], d
    print(f"node_exporter live test: {time.monotonic() - started:.1f} s")
