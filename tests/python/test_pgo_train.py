"""tools/pgo-train, the workload the profile-guided release build learns from
(tools/dev release; docs/performance.md, "A profile-guided release build"),
runs every command it names to the end with the build under test, and fails
when one of them fails: a release binary must not be trained on half a
workload. Its three replays of one synthetic run (JSONL, recording, two
executor threads) raise the same alerts, the faults it injects among them, so
the training reaches the detectors and the root-cause trees."""

import json
import os
import subprocess

from conftest import BUILD_DIR, REPO

SCRIPT = REPO / "tools" / "pgo-train"
RUNLENS = BUILD_DIR / "runlens"


def kinds(path):
    return {json.loads(line)["kind"] for line in path.read_text().splitlines()}


def test_trains_on_every_command(tmp_path):
    p = subprocess.run([str(SCRIPT), str(RUNLENS), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    for stage in ("synth", "replay", "run: live", "done"):
        assert "pgo-train: " + stage in p.stderr
    assert (tmp_path / "train.jsonl").stat().st_size > 0
    assert (tmp_path / "train.rlrec").stat().st_size > 0
    replays = [tmp_path / d / "alerts.jsonl" for d in ("out-jsonl", "out-recording", "out-threads2")]
    first = replays[0].read_text()
    assert first, "the training run raised no alerts"
    for other in replays[1:]:
        assert other.read_text() == first, other
    assert {"straggler", "thermal_throttle", "nan_loss", "diagnosis"} <= kinds(replays[0])
    # The live run stopped on SIGINT and exited 0 (the script checks it); it read the sender's frames.
    assert (tmp_path / "out-live" / "alerts.jsonl").stat().st_size > 0


def test_a_failing_command_fails_the_training(tmp_path):
    # A runlens whose replays fail, everything else real: the training stops there.
    fake = tmp_path / "runlens"
    fake.write_text('#!/bin/sh\n[ "$1" = replay ] && exit 3\nexec %s "$@"\n' % RUNLENS)
    fake.chmod(0o755)
    p = subprocess.run([str(SCRIPT), str(fake), str(tmp_path / "work")], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode != 0
    assert "pgo-train: replay" in p.stderr
    assert "pgo-train: run: live" not in p.stderr
    assert "pgo-train: done" not in p.stderr
    p = subprocess.run([str(SCRIPT), "/bin/false", str(tmp_path / "work2")], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode != 0
    assert "pgo-train: done" not in p.stderr


def test_usage(tmp_path):
    p = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "tools/pgo-train RUNLENS [DIR]" in p.stderr


def test_scratch_directory_is_removed(tmp_path):
    # Without DIR the files go to a new directory under TMPDIR, removed at the end.
    p = subprocess.run([str(SCRIPT), str(RUNLENS)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "TMPDIR": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    assert "pgo-train: done" in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_unknown_pgo_stage_is_a_configure_error(tmp_path):
    # CMakeLists.txt's RUNLENS_PGO takes generate, use or nothing; a typo must not build an unguided binary.
    p = subprocess.run(["cmake", "-S", str(REPO), "-B", str(tmp_path / "b"), "-DRUNLENS_PGO=generated"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    assert "RUNLENS_PGO is generate, use or empty, not 'generated'" in p.stderr
