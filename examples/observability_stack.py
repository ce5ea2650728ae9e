#!/usr/bin/env python3
"""runlens with the monitoring stack a platform team already runs, on one
machine (docs/integrations.md): Debian's node_exporter, Prometheus and
Alertmanager, and `runlens run` feeding them, from the shipped example
configurations (configs/prometheus/, configs/alertmanager/).

    tools/dev stack-demo                       # builds, starts everything, a demo job; Ctrl-C stops
    /usr/bin/python3 examples/observability_stack.py --runlens build/runlens --demo

It starts, on loopback ports chosen now, in a temp directory:

  * prometheus-node-exporter (this host's CPU, memory, disk, network);
  * runlens run, the default pipeline, with
      --metrics-port (the Prometheus exposition),
      RUNLENS_ALERTMANAGER (its alertmanager sink, off by default),
      RUNLENS_SCRAPE (its prometheus_scrape source reading node_exporter, the
      host named `node-local` as the demo job's run_start places its ranks);
  * prometheus, configs/prometheus/prometheus.yml with its rules, scraping
    runlens and node_exporter and sending its own rule alerts to Alertmanager;
  * prometheus-alertmanager, configs/alertmanager/alertmanager.yml's routing
    tree by owner, every receiver pointed at a webhook this script serves and
    prints (in place of the team's Slack or pager);

and prints where to look. With --demo an 8-rank job (SDK emitters, one
process) steps every 100 ms and rank 3 straggles for a while: its straggler
alert reaches Alertmanager, is routed to the infrastructure on-call (its
kind's owner) and resolves when the rank recovers. --check (with --demo)
asserts that: Prometheus has scraped runlens and node_exporter, PromQL sees
the straggler ratio, and the webhook received the straggler firing and then
resolved; it exits 1 otherwise. Every process started is stopped by its PID
when the script ends, however it ends.
"""
from __future__ import annotations

import argparse
import http.server
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

from runlens_stack import ROOT, free_port  # the eval examples' stack: loopback ports, the tree

DEMO_NODE = "node-local"
DEMO_RUN = "stack-demo"


def server_binary(name: str) -> str:
    path = shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)
    if path is None:
        sys.exit(f"observability_stack: {name} is not installed (apt-get install "
                 f"{'prometheus-node-exporter' if name.endswith('node-exporter') else name}; tools/dev test installs it)")
    return path


def get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def wait_http(url: str, proc: subprocess.Popen, log: pathlib.Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"observability_stack: {proc.args[0]} exited ({proc.returncode}):\n{log.read_text(errors='replace')}")
        try:
            get(url, timeout=1.0)
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"observability_stack: {url} did not answer within {timeout:g} s (log: {log})")


class Webhook:
    """Alertmanager's receivers, as one HTTP server: records and prints each notification."""

    def __init__(self, port: int, quiet: bool):
        self.notifications = []  # (receiver path, payload)
        self.lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.end_headers()
                try:
                    payload = json.loads(body)
                except ValueError:
                    return
                with outer.lock:
                    outer.notifications.append((self.path, payload))
                if not quiet:
                    for a in payload.get("alerts", []):
                        lab = a.get("labels", {})
                        where = " ".join(f"{k}={lab[k]}" for k in ("run_id", "rank", "node") if k in lab)
                        print(f"[alertmanager -> {self.path.strip('/')}] {a.get('status')}: {lab.get('alertname')} "
                              f"({lab.get('severity')}, owner {lab.get('owner')}) {where}: "
                              f"{a.get('annotations', {}).get('summary', '')[:100]}", flush=True)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def alerts(self):
        with self.lock:
            return [(path, a) for path, p in self.notifications for a in p.get("alerts", [])]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Stack:
    def __init__(self, args):
        self.args = args
        self.procs = []  # (name, Popen)
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="runlens-stack-")) if not args.out else pathlib.Path(args.out)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ports = {k: free_port() for k in ("listen", "publish", "metrics", "prometheus", "alertmanager",
                                               "node_exporter", "webhook")}
        self.webhook = None

    def start(self, name: str, cmd: list, env=None) -> subprocess.Popen:
        log = self.dir / f"{name}.log"
        p = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, cwd=self.dir, env=env,
                             start_new_session=True)
        self.procs.append((name, p))
        return p

    def stop(self):
        """Stops the processes in the reverse of their start, each ended before the next is signalled:
        runlens delivers what its Alertmanager sink holds at its exit, so Alertmanager must still be up
        then (signalled at once, it was sometimes gone: "1 alerts not delivered")."""
        deadline = time.monotonic() + 15
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGINT if name == "runlens" else signal.SIGTERM)
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.webhook:
            self.webhook.close()

    def configs(self):
        """The shipped example configurations with this run's ports (and, for a demo, short timers)."""
        port = self.ports
        am = (ROOT / "configs/alertmanager/alertmanager.yml").read_text()
        am = re.sub(r"url: http://127\.0\.0\.1:5001/", f"url: http://127.0.0.1:{port['webhook']}/", am)
        if self.args.demo:  # notifications within seconds, not the production half minute
            am = am.replace("group_wait: 30s", "group_wait: 1s").replace("group_interval: 5m", "group_interval: 2s")
        (self.dir / "alertmanager.yml").write_text(am)
        prom = (ROOT / "configs/prometheus/prometheus.yml").read_text()
        prom = prom.replace("127.0.0.1:9464", f"127.0.0.1:{port['metrics']}")
        if self.args.demo:
            prom = prom.replace("scrape_interval: 15s", "scrape_interval: 1s")
            prom = prom.replace("evaluation_interval: 15s", "evaluation_interval: 1s")
        prom += (f"  - job_name: node\n    static_configs:\n      - targets: [\"127.0.0.1:{port['node_exporter']}\"]\n"
                 f"alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [\"127.0.0.1:{port['alertmanager']}\"]\n")
        (self.dir / "prometheus.yml").write_text(prom)
        shutil.copy(ROOT / "configs/prometheus/runlens-rules.yml", self.dir / "runlens-rules.yml")

    def up(self):
        port = self.ports
        self.configs()
        self.webhook = Webhook(port["webhook"], quiet=self.args.quiet)
        ne = self.start("node_exporter", [server_binary("prometheus-node-exporter"),
                                          f"--web.listen-address=127.0.0.1:{port['node_exporter']}",
                                          "--collector.disable-defaults", "--collector.cpu", "--collector.meminfo",
                                          "--collector.loadavg", "--collector.diskstats", "--collector.netdev",
                                          "--collector.netstat"])
        am = self.start("alertmanager", [server_binary("prometheus-alertmanager"),
                                         f"--config.file={self.dir / 'alertmanager.yml'}",
                                         f"--storage.path={self.dir / 'alertmanager-data'}",
                                         f"--web.listen-address=127.0.0.1:{port['alertmanager']}",
                                         "--cluster.listen-address="])
        wait_http(f"http://127.0.0.1:{port['node_exporter']}/metrics", ne, self.dir / "node_exporter.log")
        wait_http(f"http://127.0.0.1:{port['alertmanager']}/-/ready", am, self.dir / "alertmanager.log")
        target = f"127.0.0.1:{port['node_exporter']}"
        rl = self.start("runlens", [str(pathlib.Path(self.args.runlens).resolve()), "run", "--out", str(self.dir / "out"),
                                    "--metrics-port", str(port["metrics"]), "--quiet",
                                    "--set", f"RUNLENS_LISTEN=tcp://127.0.0.1:{port['listen']}",
                                    "--set", f"RUNLENS_PUBLISH=tcp://127.0.0.1:{port['publish']}",
                                    "--set", f"RUNLENS_ALERTMANAGER=http://127.0.0.1:{port['alertmanager']}",
                                    "--set", f"RUNLENS_SCRAPE={target}",
                                    "--set", f"RUNLENS_SCRAPE_NODES={target}={DEMO_NODE}",
                                    "--set", "RUNLENS_SCRAPE_INTERVAL=1s"])
        wait_http(f"http://127.0.0.1:{port['metrics']}/metrics", rl, self.dir / "runlens.log")
        pr = self.start("prometheus", [server_binary("prometheus"), f"--config.file={self.dir / 'prometheus.yml'}",
                                       f"--storage.tsdb.path={self.dir / 'prometheus-data'}",
                                       f"--web.listen-address=127.0.0.1:{port['prometheus']}"])
        wait_http(f"http://127.0.0.1:{port['prometheus']}/-/ready", pr, self.dir / "prometheus.log")

    def where(self):
        port = self.ports
        q = urllib.parse.quote
        print(f"""runlens and its monitoring stack are up (logs and configs: {self.dir}):
  runlens metrics    http://127.0.0.1:{port['metrics']}/metrics
  Prometheus         http://127.0.0.1:{port['prometheus']}/graph?g0.expr={q('runlens_job_straggler_ratio')}&g0.tab=0
                     e.g. runlens_job_step_seconds, runlens_alerts_total, runlens_node_cpu_ratio, up
  Alertmanager       http://127.0.0.1:{port['alertmanager']}/#/alerts
  alert stream       runlens tail --connect tcp://127.0.0.1:{port['publish']}
  SDK endpoint       tcp://127.0.0.1:{port['listen']}  (runlens.Emitter(endpoint, ...); place ranks on node '{DEMO_NODE}'
                     to join them with this host's node_exporter samples)
  receivers          Alertmanager's notifications are printed here as they arrive""", flush=True)

    def query(self, promql: str):
        url = f"http://127.0.0.1:{self.ports['prometheus']}/api/v1/query?query={urllib.parse.quote(promql)}"
        return json.loads(get(url))["data"]["result"]


def demo_job(endpoint: str, steps: int, period: float) -> None:
    """8 ranks on node-local, one process; rank 3 works 3x from step 20 to step 60 (then recovers)."""
    import runlens

    world = 8
    placement = [{"rank": r, "node": DEMO_NODE, "gpu": r} for r in range(world)]
    ems = [runlens.Emitter(endpoint, run_id=DEMO_RUN, rank=r, world_size=world, node=DEMO_NODE, gpu=r,
                           job_id="stack-demo-job", model_id="demo-lm", ranks=placement if r == 0 else None,
                           flush_interval_ms=50) for r in range(world)]
    t0 = time.time()
    for step in range(steps):
        delay = t0 + (step + 1) * period - time.time()
        if delay > 0:
            time.sleep(delay)
        for r, em in enumerate(ems):
            work = 240.0 if (r == 3 and 20 <= step < 60) else 80.0
            em.emit("step", step=step, step_ms=work + 10.0, comm_ms=6.0, data_wait_ms=4.0, tokens=4096)
        ems[0].emit("train", step=step, loss=3.0 - 0.01 * step, lr=1e-3, grad_norm=0.5)
    for em in ems:
        em.close()


def check(stack: Stack, deadline: float) -> list:
    """What --check asserts; the failures (empty: all held)."""
    failures = []

    def poll(what, test):
        while time.monotonic() < deadline:
            try:
                if test():
                    return
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.5)
        failures.append(what)

    poll("Prometheus scrapes runlens", lambda: any(r["value"][1] == "1" for r in stack.query('up{job="runlens"}')))
    poll("Prometheus scrapes node_exporter", lambda: any(r["value"][1] == "1" for r in stack.query('up{job="node"}')))
    poll("PromQL sees the straggler ratio above 1.5",
         lambda: any(float(r["value"][1]) > 1.5
                     for r in stack.query('max_over_time(runlens_job_straggler_ratio{job_id="stack-demo-job"}[5m])')))

    def straggler(status):
        return [p for p, a in stack.webhook.alerts()
                if a["labels"].get("alertname") == "straggler" and a["labels"].get("rank") == "3" and a["status"] == status]

    poll("the straggler reached the infrastructure on-call firing",
         lambda: "/infrastructure" in straggler("firing"))
    poll("the straggler's resolution reached the infrastructure on-call",
         lambda: "/infrastructure" in straggler("resolved"))
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runlens", default=str(ROOT / os.environ.get("RUNLENS_BUILD_DIR", "build") / "runlens"))
    ap.add_argument("--out", help="directory for logs, configs and data (default: a new temp dir)")
    ap.add_argument("--demo", action="store_true", help="run an 8-rank demo job with a straggler")
    ap.add_argument("--demo-steps", type=int, default=100)
    ap.add_argument("--check", action="store_true", help="with --demo: assert what it should show; exit 1 if not")
    ap.add_argument("--duration", type=float, help="stop after this many seconds (default: until Ctrl-C)")
    ap.add_argument("--quiet", action="store_true", help="do not print the notifications")
    args = ap.parse_args()
    if args.check and not args.demo:
        ap.error("--check needs --demo")
    stack = Stack(args)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    code = 0
    try:
        stack.up()
        stack.where()
        if args.demo:
            print(f"demo: 8 ranks on {DEMO_NODE}, run {DEMO_RUN}; rank 3 straggles from step 20 to 60 of "
                  f"{args.demo_steps} (100 ms a step)", flush=True)
            demo_job(f"tcp://127.0.0.1:{stack.ports['listen']}", args.demo_steps, 0.1)
            print("demo: the job ended", flush=True)
        if args.check:
            failures = check(stack, time.monotonic() + 60)
            for f in failures:
                print(f"check FAILED: {f}", flush=True)
            print("check: " + ("all passed" if not failures else f"{len(failures)} failed"), flush=True)
            code = 1 if failures else 0
        elif args.duration is not None:
            stopping.wait(args.duration)
        else:
            while not stopping.wait(1.0):
                pass
    except KeyboardInterrupt:
        pass
    finally:
        stack.stop()
    sys.exit(code)


if __name__ == "__main__":
    main()
