"""Prometheus exposition against the real server (docs/integrations.md,
"Prometheus"): Debian's `prometheus`, started here in a temp dir on a
loopback port, scrapes a live `runlens run --metrics-port 0` fed by `runlens
send`; PromQL answers over /api/v1/query are the values the pipeline
computed (the store's step_stats, the samples sent, alerts.jsonl, the
counters at exit). `promtool` checks the exposition text and the shipped
configs/prometheus/ files. Every process started is stopped by its PID.

Fails, rather than skips, when prometheus or promtool is missing: CI
installs them (tools/dev)."""

import json
import math
import os
import re
import sqlite3
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest

from conftest import BUILD_DIR, REPO, free_tcp_port, server_binary, stop

RUNLENS = BUILD_DIR / "runlens"
CONFIGS = REPO / "configs" / "prometheus"
T0 = 1767225600_000_000_000
S = 1_000_000_000


def tool(name):
    return server_binary(name, "prometheus")


def recording(path):
    """Two ranks of job j-prom on node n-prom for 6 steps, GPU samples, a NaN
    loss at step 4 (nan_loss), then the run's end and a late node sample
    that moves the watermark past everything (the JSONL batches carry no
    producer, so the lateness rule releases them)."""
    rows = [{"type": "run_start", "time_ns": T0, "run_id": "r-prom", "job_id": "j-prom", "model_id": "m-prom",
             "cluster_id": "c-prom", "world_size": 2, "gpu_peak_flops": 1e15, "model_flops_per_token": 1e9,
             "ranks": [{"rank": 0, "node": "n-prom", "gpu": 0}, {"rank": 1, "node": "n-prom", "gpu": 1}]}]
    for step in range(1, 7):
        t = T0 + step * S
        for rank in range(2):
            rows.append({"type": "step", "time_ns": t + rank, "run_id": "r-prom", "rank": rank, "step": step,
                         "step_ms": 100.0 + 7.25 * step + 30 * rank, "comm_ms": 10.5, "data_wait_ms": 2.0,
                         "tokens": 4096})
        rows.append({"type": "train", "time_ns": t + 2, "run_id": "r-prom", "step": step,
                     "loss": "NaN" if step == 4 else 3.0 - 0.125 * step})
        for gpu in range(2):
            rows.append({"type": "gpu", "time_ns": t + 3, "node": "n-prom", "gpu": gpu, "util_pct": 90 + gpu,
                         "temp_c": 60.5 + step + gpu, "power_w": 300.25, "sm_clock_mhz": 1410,
                         "mem_used_bytes": 40 << 30, "mem_total_bytes": 80 << 30, "ecc_sbe_total": step})
        rows.append({"type": "collective", "time_ns": t + 4, "run_id": "r-prom", "rank": 0, "step": step,
                     "op": "all_reduce", "latency_ms": 12.5})
    rows.append({"type": "run_end", "time_ns": T0 + 8 * S, "run_id": "r-prom", "status": "completed"})
    rows.append({"type": "node", "time_ns": T0 + 60 * S, "node": "n-prom", "cpu_pct": 12.5})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # JSONL writes NaN as "NaN"


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def query(prom_port, promql):
    url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    body = json.loads(http_get(url))
    assert body["status"] == "success", body
    return body["data"]["result"]


def wait_for(what, check, timeout=20):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, ValueError) as e:
            last = e
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what} (last: {last!r})")


def value_of(result, **labels):
    for r in result:
        if all(r["metric"].get(k) == v for k, v in labels.items()):
            return float(r["value"][1])
    raise AssertionError(f"no series with {labels} in {result}")


def start_runlens(tmp_path):
    """`runlens run` (the default pipeline) with --metrics-port 0; returns the
    process, its telemetry endpoint and the metrics port it printed."""
    listen = f"tcp://127.0.0.1:{free_tcp_port()}"
    env = dict(os.environ, RUNLENS_LISTEN=listen, RUNLENS_PUBLISH=f"tcp://127.0.0.1:{free_tcp_port()}")
    proc = subprocess.Popen(
        [str(RUNLENS), "run", "--out", str(tmp_path / "out"), "--metrics-port", "0",
         "--counters-json", str(tmp_path / "counters.jsonl")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    lines = []
    port = {}

    def read():
        for line in proc.stderr:
            lines.append(line)
            m = re.match(r"metrics: http://127\.0\.0\.1:(\d+)/metrics$", line.strip())
            if m:
                port["value"] = int(m.group(1))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 10
    while "value" not in port and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if "value" not in port:
        stop(proc)
        pytest.fail("runlens run printed no metrics line:\n" + "".join(lines))
    return proc, listen, port["value"], lines


def start_prometheus(tmp_path, target_port):
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 200ms\n  evaluation_interval: 200ms\n"
        "scrape_configs:\n  - job_name: runlens\n    scrape_interval: 200ms\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{target_port}']\n"
    )
    port = free_tcp_port()
    proc = subprocess.Popen(
        [tool("prometheus"), f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "w"), start_new_session=True,
    )
    wait_for("prometheus to be ready", lambda: http_get(f"http://127.0.0.1:{port}/-/ready").strip() != "")
    return proc, port


def test_prometheus_scrapes_what_the_pipeline_computed(tmp_path):
    promtool = tool("promtool")
    recording(tmp_path / "feed.jsonl")
    engine = prometheus = None
    try:
        engine, listen, metrics_port, engine_log = start_runlens(tmp_path)
        sent = subprocess.run([str(RUNLENS), "send", str(tmp_path / "feed.jsonl"), "--to", listen],
                              capture_output=True, text=True, timeout=30)
        assert sent.returncode == 0, sent.stderr
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        wait_for("the last step on /metrics",
                 lambda: 'runlens_job_last_step{job_id="j-prom",model_id="m-prom",cluster_id="c-prom"} 6\n'
                 in http_get(metrics_url))
        body = http_get(metrics_url)
        (tmp_path / "metrics.txt").write_text(body)
        check = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, text=True)
        assert (check.returncode, check.stdout + check.stderr) == (0, "")

        prometheus, prom_port = start_prometheus(tmp_path, metrics_port)
        job = {"job_id": "j-prom", "model_id": "m-prom", "cluster_id": "c-prom"}
        wait_for("prometheus to scrape the job's last step",
                 lambda: query(prom_port, 'runlens_job_last_step{job_id="j-prom"} == 6'))
        results = {q: query(prom_port, q) for q in [
            "runlens_job_step_seconds", "runlens_job_loss", "runlens_job_tokens_per_second",
            "runlens_job_straggler_ratio", "runlens_job_communication_ratio", "runlens_job_mfu_ratio",
            "runlens_gpu_temperature_celsius", "runlens_gpu_ecc_sbe_errors_total",
            "runlens_job_collective_latency_seconds_count", "runlens_alerts_total",
            "runlens_pipeline_rows_in_total", "runlens_job_run_info", "up"]}
    finally:
        stop(prometheus)
        stop(engine)
    assert engine.returncode == 0, "".join(engine_log)

    # The store's step_stats of the last step, written by the same pipeline.
    db = sqlite3.connect(tmp_path / "out" / "runlens.db")
    step_ms, loss, tps, ratio, comm, mfu = db.execute(
        "SELECT step_ms, loss, tokens_per_s, straggler_ratio, communication_ratio, mfu FROM step_stats "
        "WHERE run_id = 'r-prom' ORDER BY step DESC LIMIT 1").fetchone()
    db.close()
    assert value_of(results["runlens_job_step_seconds"], **job) == step_ms / 1e3
    assert value_of(results["runlens_job_loss"], **job) == loss == 3.0 - 0.125 * 6
    assert value_of(results["runlens_job_tokens_per_second"], **job) == tps
    assert value_of(results["runlens_job_straggler_ratio"], **job) == ratio
    assert value_of(results["runlens_job_communication_ratio"], **job) == comm
    assert value_of(results["runlens_job_mfu_ratio"], **job) == mfu
    assert value_of(results["runlens_job_run_info"], run_id="r-prom", **job) == 1
    # GPU series: the last sample sent; GPU 1 carries the job's labels by placement.
    # (The run ended, so the last samples are the run's own, sent before run_end.)
    assert value_of(results["runlens_gpu_temperature_celsius"], node_id="n-prom", gpu_id="1", **job) == 60.5 + 6 + 1
    assert value_of(results["runlens_gpu_ecc_sbe_errors_total"], node_id="n-prom", gpu_id="0", **job) == 6
    assert value_of(results["runlens_job_collective_latency_seconds_count"], op="all_reduce", **job) == 6
    # The alert counter: as many nan_loss alerts as alerts.jsonl has first publications of.
    alerts = [json.loads(line) for line in (tmp_path / "out" / "alerts.jsonl").read_text().splitlines()]
    nan = [a for a in alerts if a["kind"] == "nan_loss" and a["revision"] == 0]
    assert nan, alerts
    assert value_of(results["runlens_alerts_total"], kind="nan_loss", severity=nan[0]["severity"]) == len(nan)
    # Rows in: the counters at exit (no row came after the scrape).
    counters = {c["node"]: c for c in map(json.loads, (tmp_path / "counters.jsonl").read_text().splitlines())}
    rows_in = value_of(results["runlens_pipeline_rows_in_total"], component="telemetry")
    assert rows_in == counters["telemetry"]["in"] == len((tmp_path / "feed.jsonl").read_text().splitlines())
    assert value_of(results["up"], job="runlens") == 1
    # Bounded labels only.
    labels = {k for r in sum(results.values(), []) for k in r["metric"]}
    assert not labels & {"rank", "step", "dataset_shard", "prompt_id"}, labels
    assert not math.isnan(rows_in)


def test_promtool_accepts_the_shipped_configs_and_their_rule_tests():
    promtool = tool("promtool")
    for args in (["check", "config", str(CONFIGS / "prometheus.yml")],
                 ["check", "rules", str(CONFIGS / "runlens-rules.yml")],
                 ["test", "rules", str(CONFIGS / "runlens-rules_test.yml")]):
        r = subprocess.run([promtool, *args], capture_output=True, text=True, cwd=CONFIGS, timeout=60)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
        assert "SUCCESS" in r.stdout + r.stderr, (args, r.stdout, r.stderr)


def test_replay_prints_the_metrics_address_and_a_bad_address_is_a_usage_error(tmp_path):
    golden = REPO / "tests" / "golden" / "straggler" / "input.jsonl"
    ok = subprocess.run([str(RUNLENS), "replay", str(golden), "--out", str(tmp_path / "a"), "--quiet",
                         "--metrics-port", "0"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert re.search(r"^metrics: http://127\.0\.0\.1:\d+/metrics$", ok.stderr, re.M), ok.stderr
    bad = subprocess.run([str(RUNLENS), "replay", str(golden), "--out", str(tmp_path / "b"), "--quiet",
                          "--metrics-port", "0", "--metrics-host", "256.256.256.256"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr == "runlens: --metrics-port: cannot listen on 256.256.256.256:0\n"
