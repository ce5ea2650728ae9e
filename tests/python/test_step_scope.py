"""Step scopes: phases to *_ms fields, routing of train/step fields, failures."""

import time

import pytest

import runlens
from conftest import has_run_end


@pytest.fixture
def em(collector):
    emitter = runlens.Emitter(collector.endpoint, run_id="r1", rank=1, world_size=2)
    yield emitter
    emitter.close(timeout=5)


def sent(em, collector, count):
    em.close(timeout=10)
    return collector.collect(lambda ev: len(ev) >= count)


def test_phases_fill_the_ms_fields_and_accumulate(em, collector):
    with em.step(5) as s:
        with s.phase("data"):
            time.sleep(0.02)
        with s.phase("forward"):
            time.sleep(0.01)
        with s.phase("forward"):  # repeated phases add up
            time.sleep(0.01)
        with s.phase("backward"):
            pass
        with s.phase("optimizer"):
            pass
        with s.phase("comm"):
            pass
        with s.phase("eval_hook"):  # timed, kept in the scope, not sent
            time.sleep(0.005)
    assert s.phases["eval_hook"] >= 5.0
    (step,) = sent(em, collector, 1)
    assert step["step"] == 5
    # time.sleep sleeps at least as long as asked; only lower bounds are safe
    assert step["data_wait_ms"] >= 20.0
    assert step["forward_ms"] >= 20.0
    for field in ("backward_ms", "optimizer_ms", "comm_ms"):
        assert step[field] >= 0.0
    assert step["step_ms"] >= step["data_wait_ms"] + step["forward_ms"]
    assert step["step_ms"] == pytest.approx(s.step_ms)
    assert "eval_hook" not in str(step)


def test_phases_not_used_are_absent(em, collector):
    with em.step(1) as s:
        with s.phase("forward"):
            pass
    (step,) = sent(em, collector, 1)
    assert "forward_ms" in step and "step_ms" in step
    for field in ("backward_ms", "optimizer_ms", "comm_ms", "data_wait_ms"):
        assert field not in step


def test_train_and_set_route_fields_to_the_right_event(em, collector):
    with em.step(3) as s:
        s.train(loss=2.0, lr=1e-3, grad_norm=0.5, tokens=1024, samples=4)
        s.set(seq_len=256, dataset_shard="shard-1", weight_norm=10.0)
    events = {e["type"]: e for e in sent(em, collector, 2)}
    step, train = events["step"], events["train"]
    assert {k: step[k] for k in ("tokens", "samples", "seq_len", "dataset_shard")} == {
        "tokens": 1024, "samples": 4, "seq_len": 256, "dataset_shard": "shard-1"}
    assert {k: train[k] for k in ("step", "rank", "loss", "lr", "grad_norm", "weight_norm")} == {
        "step": 3, "rank": 1, "loss": 2.0, "lr": 1e-3, "grad_norm": 0.5, "weight_norm": 10.0}
    assert "loss" not in step and "tokens" not in train


def test_no_train_event_without_train_fields(em, collector):
    with em.step(1):
        pass
    events = sent(em, collector, 1)
    assert [e["type"] for e in events] == ["step"]


def test_explicit_values_override_measured_ones(em, collector):
    with em.step(1, tokens=10) as s:
        with s.phase("forward"):
            pass
        s.set(forward_ms=123.0, step_ms=456.0)
    (step,) = sent(em, collector, 1)
    assert step["forward_ms"] == 123.0 and step["step_ms"] == 456.0 and step["tokens"] == 10


def test_event_defaults_to_the_open_step(em, collector):
    with em.step(42):
        em.event("config_change", key="lr", old=1e-3, new=1e-2)
    em.event("restart", step=7)
    events = sent(em, collector, 3)
    by_kind = {e["kind"]: e for e in events if e["type"] == "event"}
    assert by_kind["config_change"]["step"] == 42
    assert by_kind["config_change"]["old"] == 1e-3 and by_kind["config_change"]["new"] == 1e-2
    assert by_kind["restart"]["step"] == 7


@pytest.mark.parametrize(
    "error, kind",
    [
        (ValueError("bad batch"), "exception"),
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "oom"),
        (RuntimeError("NCCL watchdog: collective operation timeout"), "nccl_timeout"),
        (KeyboardInterrupt(), "abort"),
    ],
)
def test_a_failing_step_sends_a_failure_event_and_no_step(collector, error, kind):
    em = runlens.Emitter(collector.endpoint, run_id="r1", rank=0, world_size=1)
    with pytest.raises(type(error)):
        with em.step(9):
            raise error
    em.close(timeout=10)  # no status given: the last step failed
    events = collector.collect(has_run_end)
    (failure,) = [e for e in events if e["type"] == "event"]
    assert failure["kind"] == kind and failure["step"] == 9
    assert type(error).__name__ in failure["message"]
    assert not [e for e in events if e["type"] == "step"]
    (end,) = collector.of_type("run_end")
    assert end["status"] == "failed"


def test_stop_iteration_ends_a_loop_quietly(collector):
    em = runlens.Emitter(collector.endpoint, run_id="r1", rank=0, world_size=1)
    it = iter([1])
    for step in range(3):
        try:
            with em.step(step) as s:
                with s.phase("data"):
                    next(it)
        except StopIteration:
            break
    em.close(timeout=10)
    events = collector.collect(has_run_end)
    assert [e["type"] for e in events if e["type"] != "run_start"] == ["step", "run_end"]
    assert collector.of_type("run_end")[0]["status"] == "completed"


def test_emitter_as_context_manager_closes_with_failed_status(collector):
    with pytest.raises(RuntimeError):
        with runlens.Emitter(collector.endpoint, run_id="r1", rank=0, world_size=1):
            raise RuntimeError("diverged")
    collector.collect(has_run_end)
    (end,) = collector.of_type("run_end")
    assert end["status"] == "failed" and "diverged" in end["reason"]


def test_garbage_collected_emitter_still_sends_run_end(collector):
    em = runlens.Emitter(collector.endpoint, run_id="r1", rank=0, world_size=1)
    em.emit("step", step=0, step_ms=1.0)
    del em  # the finalizer closes it
    collector.collect(has_run_end)
    assert collector.of_type("run_end")[0]["status"] == "completed"


def test_unknown_field_in_a_scope_warns_and_is_not_sent(em, collector):
    with pytest.warns(RuntimeWarning, match="tokns"):
        with em.step(1) as s:
            s.train(tokns=5, loss=1.0)
    events = {e["type"]: e for e in sent(em, collector, 2)}
    assert "tokns" not in events["step"] and "tokns" not in events["train"]
    assert em.stats()["unknown_fields"] == 1
