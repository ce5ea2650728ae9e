"""examples/ddp_train.py: a real 4-process DDP run reaches a collector."""

import pytest

from conftest import REPO, has_run_end, run_script

pytest.importorskip("torch")

STEPS = 4


def test_example_sends_steps_from_all_four_ranks(collector):
    job = run_script(
        [REPO / "examples" / "ddp_train.py", "--endpoint", collector.endpoint,
         "--run-id", "example-test", "--steps", STEPS, "--world-size", 4,
         "--slow-rank", 2, "--slow-from", 1, "--slow-ms", 20],
        timeout=400,
    )
    assert job.returncode == 0, f"the example failed:\n{job.stdout}"
    collector.collect(has_run_end, timeout=30)
    collector.collect(timeout=5)

    steps = collector.of_type("step")
    assert {(e["rank"], e["step"]) for e in steps} == {(r, s) for r in range(4) for s in range(STEPS)}
    assert all(e["run_id"] == "example-test" for e in collector.events)
    for e in steps:
        for field in ("step_ms", "forward_ms", "backward_ms", "optimizer_ms", "comm_ms",
                      "data_wait_ms", "tokens", "samples", "seq_len", "dataset_shard"):
            assert field in e, (field, e)
    assert len(collector.of_type("train")) == 4 * STEPS
    (start,) = collector.of_type("run_start")
    assert start["world_size"] == 4 and len(start["ranks"]) == 4
    (end,) = collector.of_type("run_end")
    assert end["status"] == "completed"
