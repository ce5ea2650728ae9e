"""The peers of bench/peers/ (ClickHouse, pandas) agree with runlens's per-step
aggregates on a small synthetic run with a straggler and a NaN loss, and a
disagreement is caught: check_agree replays the file through the default
pipeline into a SQLite store and compares the store's step_stats with each
peer's answers. ClickHouse is Debian's clickhouse-server, started by the peer
itself on a loopback port and stopped by its PID; pandas is python3-pandas.

Fails, rather than skips, when clickhouse-server or pandas is missing: the
test command installs them (tools/dev)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import BUILD_DIR, REPO

RUNLENS = BUILD_DIR / "runlens"
PEERS = REPO / "bench" / "peers"
sys.path.insert(0, str(PEERS))

import check_agree  # noqa: E402
import clickhouse_peer  # noqa: E402

STRAGGLER, STRAGGLER_FROM, NAN_FROM, STEPS = 13, 20, 45, 60


def clickhouse_binary():
    path = shutil.which("clickhouse-server") or clickhouse_peer.SERVER_BINARY
    if not os.path.exists(path):
        pytest.fail("clickhouse-server is not installed (Debian package clickhouse-server; tools/dev test installs it)")
    return path


@pytest.fixture(scope="module")
def run_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("peers")
    path = d / "run.jsonl"
    subprocess.run([str(RUNLENS), "synth", "--ranks", "64", "--steps", str(STEPS), "--detail-every", "5", "--gc-pause-rate", "0",
                    "--fault", "straggler:rank=%d,from=%d" % (STRAGGLER, STRAGGLER_FROM),
                    "--fault", "nan:step=%d" % NAN_FROM, "--out", str(path)], check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def reference(run_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("replay")
    return check_agree.runlens_answers(str(RUNLENS), str(run_file), str(out))


@pytest.fixture(scope="module")
def threshold():
    return check_agree.straggler_threshold(str(RUNLENS))


def test_runlens_reference_holds_the_injected_faults(reference, threshold):
    assert threshold == 1.5
    steps = reference["steps"]
    assert len(steps) == STEPS
    above = sorted(int(k.split("/")[1]) for k, (ratio, _) in steps.items() if ratio > threshold)
    assert above == list(range(STRAGGLER_FROM, STEPS + 1))
    assert all(steps["synth-run/%d" % s][1] == STRAGGLER for s in above)
    assert reference["nan_steps"] == ["synth-run/%d" % s for s in range(NAN_FROM, STEPS + 1)]


def test_clickhouse_peer_agrees_and_its_server_is_stopped(run_file, reference, threshold):
    with clickhouse_peer.ClickHouseServer(clickhouse_binary()) as server:
        pid = server.proc.pid
        assert os.path.exists("/proc/%d" % pid)
        answers, timings = clickhouse_peer.run(str(run_file), server.port)
    assert not os.path.exists("/proc/%d" % pid)
    # step and train rows only: 64 ranks x 60 steps, 60 train rows
    assert timings["rows_loaded"] == 64 * STEPS + STEPS
    diffs, borderline = check_agree.compare(reference, answers, threshold, 1e-9)
    assert diffs == []
    assert borderline == []
    assert answers["nan_steps"] == reference["nan_steps"]


def test_pandas_peer_agrees(run_file, reference, threshold):
    import pandas_peer

    answers, timings = pandas_peer.run(str(run_file))
    assert timings["rows_loaded"] == 64 * STEPS + STEPS
    diffs, _ = check_agree.compare(reference, answers, threshold, 1e-9)
    assert diffs == []


def test_compare_tolerates_the_last_bits_only(reference, threshold):
    peer = json.loads(json.dumps(reference))
    key = "synth-run/30"
    ratio, rank = peer["steps"][key]
    peer["steps"][key] = [ratio * (1 + 1e-12), rank]
    assert check_agree.compare(reference, peer, threshold, 1e-9) == ([], [])
    peer["steps"][key] = [ratio * (1 + 1e-6), rank]
    diffs, _ = check_agree.compare(reference, peer, threshold, 1e-9)
    assert len(diffs) == 1 and diffs[0].startswith("step synth-run/30: ratio ")
    # a ratio on the threshold is borderline, whichever side each lands on
    on = json.loads(json.dumps(reference))
    on["steps"][key] = [threshold, rank]
    peer["steps"][key] = [threshold * (1 + 1e-12), rank]
    assert check_agree.compare(on, peer, threshold, 1e-9) == ([], [key])


def test_check_agree_exits_nonzero_on_a_tampered_peer(run_file, tmp_path):
    import pandas_peer

    answers, _ = pandas_peer.run(str(run_file))
    answers["steps"]["synth-run/%d" % (STRAGGLER_FROM + 5)][1] = STRAGGLER + 1  # another slowest rank
    answers["nan_steps"].remove("synth-run/%d" % NAN_FROM)  # a NaN step missed
    answers["steps"]["synth-run/3"][0] = 1.9  # a healthy step above the threshold
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(answers))
    proc = subprocess.run([sys.executable, str(PEERS / "check_agree.py"), "--file", str(run_file), "--runlens",
                           str(RUNLENS), "--peers", "pandas", "--answers", "tampered=%s" % tampered],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    # the store's step_stats are also what `runlens serve` answers on GET /v1/runs/{id}/steps
    assert lines[0] == ("runlens: 60 steps, 41 above 1.5, 16 NaN steps "
                        "(the store's step_stats and GET /v1/runs/{id}/steps alike)")
    assert lines[1].startswith("pandas: agrees: 60 steps, 41 above 1.5, the same slowest ranks, 16 NaN steps")
    assert lines[2] == "tampered: DISAGREES with runlens in 4 places; the first:"
    assert lines[3] == "  step synth-run/3: ratio 1.8999999999999999, runlens %s" % lines[3].split("runlens ")[1]
    assert "  step synth-run/3: above the threshold 1.5" in lines[4]
    assert lines[5] == "  step synth-run/25: slowest rank %d, runlens %d" % (STRAGGLER + 1, STRAGGLER)
    assert lines[6] == "  step synth-run/%d: NaN loss in runlens, not in the peer" % NAN_FROM
