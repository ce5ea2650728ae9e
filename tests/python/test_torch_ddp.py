"""runlens.torch.instrument on a real 2-process gloo DDP job (CPU)."""

import math
import pathlib

import pytest

from conftest import has_run_end, run_script

pytest.importorskip("torch")  # python3-torch; the SDK itself does not need it

HERE = pathlib.Path(__file__).resolve().parent
STEPS, NAN_STEP = 5, 3


def test_instrument_measures_comm_wait_and_counts_nan(collector):
    job = run_script(
        [HERE / "ddp_instrument_job.py", "--endpoint", collector.endpoint,
         "--steps", STEPS, "--nan-step", NAN_STEP],
        timeout=300,
    )
    assert job.returncode == 0, f"the DDP job failed:\n{job.stdout}"
    collector.collect(has_run_end, timeout=30)
    collector.collect(timeout=5)  # rank 1 may close after rank 0's run_end

    steps = {(e["rank"], e["step"]): e for e in collector.of_type("step")}
    assert set(steps) == {(r, s) for r in (0, 1) for s in range(STEPS)}
    for key, step in steps.items():
        # the all-reduce wait is measured on every rank and every step
        assert step["comm_ms"] > 0, key
        assert step["backward_ms"] >= 0 and step["forward_ms"] >= 0

    trains = {(e["rank"], e["step"]): e for e in collector.of_type("train")}
    assert set(trains) == set(steps)
    for rank in (0, 1):
        for s in range(NAN_STEP):
            assert trains[rank, s]["nan_count"] == 0 and trains[rank, s]["inf_count"] == 0
    # rank 0's own gradients and loss are NaN at NAN_STEP
    bad = trains[0, NAN_STEP]
    assert math.isnan(bad["loss"])
    assert bad["nan_count"] > 1  # the loss plus at least one gradient element
    # after the all-reduce the NaN weights reach rank 1 too
    assert trains[1, NAN_STEP + 1]["nan_count"] > 0

    collectives = collector.of_type("collective")
    assert {(e["rank"], e["step"]) for e in collectives} == set(steps)
    assert all(e["op"] == "allreduce" and e["bytes"] > 0 and e["latency_ms"] > 0 for e in collectives)
