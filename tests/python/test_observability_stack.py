"""examples/observability_stack.py --demo --check: node_exporter, Prometheus
and Alertmanager (Debian's, started by the script on loopback ports) fed by
`runlens run` from the shipped example configurations; the script asserts
that Prometheus scraped runlens and node_exporter, that PromQL sees the demo's
straggler, and that Alertmanager routed the straggler to the infrastructure
on-call firing and then resolved (issue 15's "Done when")."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("RUNLENS_BUILD_DIR", ROOT / "build"))


def test_the_stack_demo_feeds_prometheus_and_alertmanager(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    p = subprocess.run([sys.executable, str(ROOT / "examples/observability_stack.py"), "--runlens",
                        str(BUILD / "runlens"), "--demo", "--check", "--quiet", "--out", str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "check: all passed" in p.stdout
    assert "Prometheus         http://127.0.0.1:" in p.stdout
    # The sink delivered everything it held before runlens stopped.
    log = (tmp_path / "runlens.log").read_text()
    assert "not delivered" not in log, log
