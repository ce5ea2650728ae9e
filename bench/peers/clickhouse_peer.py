#!/usr/bin/env python3
"""The ClickHouse peer: what a platform engineer does without runlens, with
Debian's clickhouse-server (18.16) and its HTTP interface.

  /usr/bin/python3 bench/peers/clickhouse_peer.py --file g.jsonl [--answers a.json] [--repeat 3]

Starts `clickhouse-server` itself as a plain process (ClickHouseServer: a
config in a temp dir, HTTP only, on a loopback port chosen at run time, its
data, tmp and log dirs in the temp dir), waits for /ping, and stops it by PID at
the end, pass or fail. Then, timed from the load to the last answer:

  split   grep the step and train rows out of the JSONL (`grep '^{"type":"(step|train)"'`)
  load    stream them into a Memory table (INSERT ... FORMAT JSONEachRow over HTTP)
  queries the per-step straggler query and the NaN query (STRAGGLER_SQL, NAN_SQL)

and prints the timings as one JSON line. synth writes a NaN loss as the JSON
string "NaN" (formats/json_writer.cc); ClickHouse 18.16's JSONEachRow parses a
quoted "NaN" (and "Infinity") into Float64 as it is, so no rewriting is needed.
"""
import argparse
import http.client
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # bench/: overload_recording
from overload_recording import free_port  # noqa: E402

SERVER_BINARY = "/usr/sbin/clickhouse-server"

# The step and train rows of the file: the two kinds the queries read. The
# other columns of a row are skipped (input_format_skip_unknown_fields).
TABLE_SQL = """CREATE TABLE rows (
  type String, run_id String, step Int64, rank Int32,
  step_ms Float64, comm_ms Float64, data_wait_ms Float64, loss Nullable(Float64)
) ENGINE = Memory"""

# Per step: work = step_ms - comm_ms - data_wait_ms (at least 0, as
# operators/straggler.cc's straggler_work_ms); ratio = max / median, the median
# being runlens's lower median (element (n-1)/2 of the sorted works, step_stats'
# nearest-rank p50); the slowest rank, the lowest rank among equal maxima (as
# step_stats, which scans ranks in order).
STRAGGLER_SQL = """SELECT run_id, step, count() AS n,
  arrayElement(arraySort(groupArray(w)), intDiv(toInt64(n) - 1, 2) + 1) AS median,
  max(w) AS slowest_ms,
  if(median > 0, slowest_ms / median, 0) AS ratio,
  argMax(rank, (w, -rank)) AS slowest_rank
FROM (SELECT run_id, step, rank, greatest(step_ms - comm_ms - data_wait_ms, 0) AS w FROM rows WHERE type = 'step')
GROUP BY run_id, step ORDER BY run_id, step FORMAT TabSeparated"""

# The steps whose loss is NaN (a train row without a loss is NULL, not NaN).
NAN_SQL = """SELECT DISTINCT run_id, step FROM rows WHERE type = 'train' AND isNaN(loss) = 1
ORDER BY run_id, step FORMAT TabSeparated"""

SPLIT_PATTERN = '^\\{"type":"(step|train)"'


CONFIG = """<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{dir}/log/server.log</log><errorlog>{dir}/log/server.err.log</errorlog><console>0</console></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>{port}</http_port>
  <path>{dir}/data/</path>
  <tmp_path>{dir}/tmp/</tmp_path>
  <user_files_path>{dir}/user_files/</user_files_path>
  <format_schema_path>{dir}/format_schemas/</format_schema_path>
  <mark_cache_size>268435456</mark_cache_size>
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default>
  </users>
  <profiles><default><max_memory_usage>8000000000</max_memory_usage></default></profiles>
  <quotas><default></default></quotas>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
</yandex>
"""


class ClickHouseServer:
    """A clickhouse-server process of our own: HTTP on 127.0.0.1:PORT only (no
    TCP, interserver or MySQL port is configured, so none is opened), every file
    under a temp dir that goes with it. Use as a context manager: stopped by PID
    (SIGTERM, then SIGKILL) on the way out, pass or fail."""

    def __init__(self, binary: str = SERVER_BINARY, keep_dir: bool = False):
        self.binary = binary
        self.keep_dir = keep_dir
        self.proc = None
        self.port = None
        self.ping_s = None
        self._tmp = None

    def __enter__(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="runlens-clickhouse-")
        d = pathlib.Path(self._tmp.name)
        for sub in ("data", "tmp", "log", "user_files", "format_schemas"):
            (d / sub).mkdir()
        # A port taken between free_port() and the server's bind is retried.
        for attempt in range(5):
            self.port = free_port()
            (d / "config.xml").write_text(CONFIG.format(dir=d, port=self.port))
            out = open(d / "log" / "stdout.log", "wb")
            start = time.perf_counter()
            self.proc = subprocess.Popen([self.binary, "--config-file=" + str(d / "config.xml")], stdout=out,
                                         stderr=subprocess.STDOUT, cwd=d, start_new_session=True)
            out.close()
            if self._wait_ping(timeout=30):
                self.ping_s = time.perf_counter() - start
                return self
            log = (d / "log" / "server.err.log")
            text = log.read_text(errors="replace") if log.exists() else ""
            self.stop()
            if "Address already in use" not in text:
                raise RuntimeError("clickhouse-server did not answer /ping:\n" + text[-4000:])
        raise RuntimeError("clickhouse-server: no free port after 5 tries")

    def __exit__(self, *exc):
        self.stop()
        if self._tmp is not None and not self.keep_dir:
            self._tmp.cleanup()
        return False

    def _wait_ping(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/ping")
                ok = conn.getresponse().read().strip() == b"Ok."
                conn.close()
                if ok:
                    return True
            except OSError:
                pass
            time.sleep(0.01)
        return False

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.pid = self.proc.pid
        self.proc = None


class Client:
    """SQL over ClickHouse's HTTP interface, on one kept-alive connection."""

    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600, blocksize=1 << 20)

    def query(self, sql: str, body=None, **settings) -> str:
        if body is None:
            url, body = "/?" + urllib.parse.urlencode(settings) if settings else "/", sql.encode()
        else:
            url = "/?" + urllib.parse.urlencode(dict(query=sql, **settings))
        self.conn.request("POST", url, body=body)
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError("ClickHouse: HTTP %d for %s: %s" % (resp.status, sql.split("\n")[0],
                                                                   data.decode(errors="replace")[:2000]))
        return data.decode()

    def close(self):
        self.conn.close()


def run(path: str, port: int):
    """Split, load and both queries against the server on `port`: (answers, timings).
    answers: {"steps": {"run/step": [ratio, slowest_rank]}, "nan_steps": ["run/step", ...]}."""
    client = Client(port)
    try:
        client.query("DROP TABLE IF EXISTS rows")
        client.query(TABLE_SQL)
        t0 = time.perf_counter()
        grep = subprocess.Popen(["grep", "-E", SPLIT_PATTERN, path], stdout=subprocess.PIPE, bufsize=1 << 20)
        try:
            client.query("INSERT INTO rows FORMAT JSONEachRow", body=grep.stdout, input_format_skip_unknown_fields=1)
        finally:
            grep.stdout.close()
            rc = grep.wait()
        if rc not in (0, 1):  # 1: no line matched, which the load took as no rows
            raise RuntimeError("grep exited with %d on %s" % (rc, path))
        t1 = time.perf_counter()
        straggler = client.query(STRAGGLER_SQL)
        t2 = time.perf_counter()
        nan = client.query(NAN_SQL)
        t3 = time.perf_counter()
        loaded = int(client.query("SELECT count() FROM rows FORMAT TabSeparated").strip())
        client.query("DROP TABLE rows")
    finally:
        client.close()
    steps = {}
    for line in straggler.splitlines():
        run_id, step, _n, _median, _slowest_ms, ratio, slowest_rank = line.split("\t")
        steps["%s/%s" % (run_id, step)] = [float(ratio), int(slowest_rank)]
    nan_steps = ["%s/%s" % tuple(line.split("\t")) for line in nan.splitlines()]
    timings = {"peer": "clickhouse", "file": path, "rows_loaded": loaded, "split_load_s": round(t1 - t0, 4),
               "straggler_query_s": round(t2 - t1, 4), "nan_query_s": round(t3 - t2, 4),
               "total_s": round(t3 - t0, 4)}
    return {"steps": steps, "nan_steps": nan_steps}, timings


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", required=True, help="runlens JSONL telemetry (e.g. from `runlens synth --out F.jsonl`)")
    ap.add_argument("--answers", help="write the per-step answers here (JSON), for check_agree.py")
    ap.add_argument("--repeat", type=int, default=1, help="runs against the one server (one timing line each)")
    ap.add_argument("--server", default=SERVER_BINARY)
    args = ap.parse_args()
    with ClickHouseServer(args.server) as server:
        for i in range(args.repeat):
            answers, timings = run(args.file, server.port)
            timings["ping_ms"] = round(server.ping_s * 1000, 1)
            timings["server_pid"] = server.proc.pid
            print(json.dumps(timings), flush=True)
    if args.answers:
        pathlib.Path(args.answers).write_text(json.dumps(answers))


if __name__ == "__main__":
    sys.exit(main())
