"""What goes on the wire: fields, presence, types, run_start/run_end, priorities."""

import math
import time

import pytest

import runlens
from conftest import has_run_end


def make(collector, **kw):
    kw.setdefault("run_id", "r1")
    kw.setdefault("rank", 1)
    kw.setdefault("world_size", 2)
    return runlens.Emitter(collector.endpoint, **kw)


def without_envelope(event):
    return {k: v for k, v in event.items() if k not in ("time_ns",)}


def test_unset_fields_are_absent_and_zero_is_present(collector):
    em = make(collector)
    assert em.emit("step", step=7, step_ms=0.0, tokens=0)
    assert em.close(timeout=10)
    (step,) = collector.collect(lambda ev: ev)
    assert without_envelope(step) == {
        "type": "step",
        "run_id": "r1",
        "rank": 1,
        "step": 7,
        "step_ms": 0.0,
        "tokens": 0,
    }


def test_every_type_round_trips_with_all_fields(collector):
    em = make(collector, node="node-3", gpu=5, tenant="team-a")
    step = dict(
        step=11, step_ms=10.5, forward_ms=1.0, backward_ms=2.0, optimizer_ms=3.0, comm_ms=4.0,
        data_wait_ms=5.0, tokens=4096, samples=8, seq_len=512, dataset_shard="shard-7",
        mem_allocated_bytes=1 << 30, mem_reserved_bytes=2 << 30, mem_peak_bytes=3 << 30,
    )
    train = dict(
        step=11, loss=2.5, val_loss=2.75, lr=3e-4, grad_norm=1.25, weight_norm=80.0,
        loss_scale=65536.0, nan_count=0, inf_count=0,
    )
    data = dict(
        step=11, batch_load_ms=12.0, decode_ms=1.5, tokenize_ms=2.5, prefetch_queue_depth=3,
        cache_hit_rate=0.75, storage_read_ms=9.0, bytes_read=123456, dataset_shard="shard-7",
        dataset_version="v3",
    )
    collective = dict(step=11, op="allreduce", latency_ms=7.5, bytes=1 << 20)
    checkpoint = dict(
        checkpoint_id="ckpt-11", step=11, duration_ms=1500.0, size_bytes=1 << 33, upload_ms=900.0,
        ok=True, uri="s3://bucket/ckpt-11", sha256="ab" * 32,
    )
    event = dict(kind="xid", step=11, code=79, message="GPU has fallen off the bus")
    change = dict(kind="config_change", step=12, key="lr", old=3e-4, new="cosine")
    for kind, fields in [("step", step), ("train", train), ("data", data),
                         ("collective", collective), ("checkpoint", checkpoint),
                         ("event", event), ("event", change)]:
        assert em.emit(kind, **fields), kind
    assert em.close(timeout=10)
    events = collector.collect(lambda ev: len(ev) >= 7)
    assert len(events) == 7
    by = {(e["type"], e.get("kind")): e for e in events}
    identity = {"run_id": "r1", "tenant": "team-a"}
    assert without_envelope(by["step", None]) == {"type": "step", "rank": 1, **identity, **step}
    assert without_envelope(by["train", None]) == {"type": "train", "rank": 1, **identity, **train}
    assert without_envelope(by["data", None]) == {"type": "data", "rank": 1, **identity, **data}
    assert without_envelope(by["collective", None]) == {
        "type": "collective", "rank": 1, **identity, **collective}
    assert without_envelope(by["checkpoint", None]) == {"type": "checkpoint", **identity, **checkpoint}
    # rank, node and gpu of an event default to the emitter's
    host = {"rank": 1, "node": "node-3", "gpu": 5}
    assert without_envelope(by["event", "xid"]) == {"type": "event", **identity, **host, **event}
    assert without_envelope(by["event", "config_change"]) == {"type": "event", **identity, **host, **change}


def test_time_ns_is_wall_clock_at_emit_unless_given(collector):
    em = make(collector)
    before = time.time_ns()
    em.emit("step", step=1, step_ms=1.0)
    after = time.time_ns()
    em.emit("step", step=2, step_ms=1.0, time_ns=1_700_000_000_123_456_789)
    em.close(timeout=10)
    events = {e["step"]: e for e in collector.collect(lambda ev: len(ev) >= 2)}
    assert before <= events[1]["time_ns"] <= after
    assert events[2]["time_ns"] == 1_700_000_000_123_456_789


def test_rank0_sends_run_start_and_run_end(collector):
    em = runlens.Emitter(
        collector.endpoint, run_id="r1", rank=0, world_size=4, node="node-0", gpu=0,
        config={"lr": 1e-3, "optimizer": "adamw", "layers": 24},
        experiment_id="exp-1", job_id="job-9", model_id="llm-7b", model_version="v2",
        dataset_version="web-v5", code_commit="abc123", gpu_peak_flops=989e12,
        model_flops_per_token=42e9,
        ranks=[(r, f"node-{r // 2}", r % 2) for r in range(4)], cluster_id="east-1",
    )
    em.emit("step", step=0, step_ms=1.0)
    assert em.close(timeout=10)
    events = collector.collect(has_run_end)
    starts, ends = collector.of_type("run_start"), collector.of_type("run_end")
    assert len(starts) == 1 and len(ends) == 1
    assert without_envelope(starts[0]) == {
        "type": "run_start", "run_id": "r1", "experiment_id": "exp-1", "job_id": "job-9",
        "model_id": "llm-7b", "model_version": "v2", "dataset_version": "web-v5",
        "code_commit": "abc123", "world_size": 4, "gpu_peak_flops": 989e12,
        "model_flops_per_token": 42e9,
        "config": {"lr": 1e-3, "optimizer": "adamw", "layers": 24.0},
        # gpu_model only where this host has CUDA (entries on the emitter's node; test_sdk_ranks.py)
        "ranks": [{"rank": r, "node": f"node-{r // 2}", "gpu": r % 2,
                   **({"gpu_model": m} if (m := runlens._local_gpu_model(r % 2)) and r < 2 else {})}
                  for r in range(4)],
        "cluster_id": "east-1",
    }
    assert without_envelope(ends[0]) == {"type": "run_end", "run_id": "r1", "status": "completed"}
    assert events[-1]["type"] == "run_end"  # after everything queued before close
    assert starts[0]["time_ns"] <= ends[0]["time_ns"]


def test_run_start_without_optional_metadata(collector):
    em = runlens.Emitter(collector.endpoint, run_id="bare", rank=0, world_size=1)
    em.close(timeout=10, status="failed", reason="NaN loss at step 12")
    collector.collect(has_run_end)
    (start,) = collector.of_type("run_start")
    assert without_envelope(start) == {"type": "run_start", "run_id": "bare", "world_size": 1}
    (end,) = collector.of_type("run_end")
    assert end["status"] == "failed" and end["reason"] == "NaN loss at step 12"


def test_other_ranks_send_neither_run_start_nor_run_end(collector):
    em = make(collector, rank=3, world_size=4)
    em.emit("step", step=0, step_ms=1.0)
    em.close(timeout=10)
    events = collector.collect()
    assert [e["type"] for e in events] == ["step"]


def test_non_finite_loss_is_sent_as_is_with_priority_p0(collector):
    em = make(collector)
    em.emit("train", step=1, loss=float("nan"), grad_norm=float("inf"))
    em.emit("train", step=2, loss=1.0)
    assert em.stats()["emitted"]["p0"] == 1
    assert em.stats()["emitted"]["p1"] == 1
    em.close(timeout=10)
    events = {e["step"]: e for e in collector.collect(lambda ev: len(ev) >= 2)}
    assert math.isnan(events[1]["loss"])
    assert events[1]["grad_norm"] == math.inf
    assert events[2]["loss"] == 1.0


@pytest.mark.parametrize(
    "kind, fields, priority",
    [
        ("event", {"kind": "oom"}, "p0"),
        ("event", {"kind": "xid", "code": 79}, "p0"),
        ("event", {"kind": "exception"}, "p0"),
        ("event", {"kind": "nccl_timeout"}, "p0"),
        ("event", {"kind": "abort"}, "p0"),
        ("event", {"kind": "restart"}, "p0"),
        ("event", {"kind": "config_change", "key": "lr"}, "p1"),
        ("event", {"kind": "profiler_note"}, "p3"),
        ("step", {"step": 1, "step_ms": 1.0}, "p1"),
        ("train", {"step": 1, "loss": 2.0}, "p1"),
        ("train", {"step": 1, "nan_count": 3}, "p0"),
        ("train", {"step": 1, "inf_count": 1}, "p0"),
        ("checkpoint", {"checkpoint_id": "c", "ok": True}, "p1"),
        ("checkpoint", {"checkpoint_id": "c", "ok": False}, "p0"),
        ("data", {"step": 1}, "p2"),
        ("data", {"batch_load_ms": 3.0}, "p2"),
        ("collective", {"step": 1, "op": "allreduce", "latency_ms": 2.0}, "p2"),
    ],
)
def test_priority_of_each_event(dead_endpoint, kind, fields, priority):
    em = runlens.Emitter(dead_endpoint, run_id="r1", rank=1, world_size=2)
    assert em.emit(kind, **fields)
    emitted = em.stats()["emitted"]
    assert emitted == {p: int(p == priority) for p in ("p0", "p1", "p2", "p3")}
    em.close(timeout=0)


def test_unknown_field_warns_once_and_the_event_still_goes(collector):
    em = make(collector)
    with pytest.warns(RuntimeWarning, match="loos"):
        assert em.emit("train", step=1, loos=2.0, loss=2.5)
    em.close(timeout=10)
    (train,) = collector.collect(lambda ev: ev)
    assert train["loss"] == 2.5 and "loos" not in train
    assert em.stats()["unknown_fields"] == 1


def test_value_that_does_not_convert_is_skipped_and_counted(collector):
    em = make(collector)
    assert em.emit("step", step=1, step_ms=2.0, tokens="many", forward_ms=object(), samples=8.0, seq_len=2.5)
    assert not em.emit("step", step="one", step_ms=1.0)  # a required field is unusable: not sent
    em.close(timeout=10)
    (step,) = collector.collect(lambda ev: ev)
    assert step["samples"] == 8
    assert "tokens" not in step and "forward_ms" not in step and "seq_len" not in step
    assert em.stats()["invalid_fields"] == 4
    assert em.stats()["invalid_events"] == 1


@pytest.mark.parametrize(
    "kind, fields",
    [
        ("step", {"step_ms": 1.0}),            # step
        ("step", {"step": 1}),                 # step_ms
        ("train", {"loss": 1.0}),              # step
        ("collective", {"step": 1, "op": "allreduce"}),  # latency_ms
        ("checkpoint", {"step": 1, "ok": True}),         # checkpoint_id
        ("event", {"message": "no kind"}),              # kind
        ("event", {"kind": ""}),
    ],
)
def test_event_missing_a_required_field_is_refused_and_counted(dead_endpoint, kind, fields):
    em = runlens.Emitter(dead_endpoint, run_id="r1", rank=1, world_size=2)
    assert em.emit(kind, **fields) is False
    stats = em.stats()
    assert stats["invalid_events"] == 1 and sum(stats["emitted"].values()) == 0
    em.close(timeout=0)


def test_long_texts_are_cut_at_a_character_boundary(collector):
    em = make(collector)
    em.event("exception", message="é" * 5000)
    em.close(timeout=10)
    (event,) = collector.collect(lambda ev: ev)
    assert event["kind"] == "exception"
    assert 0 < len(event["message"].encode()) <= 352
    assert set(event["message"]) == {"é"}  # decodes as UTF-8: no broken code point
    assert em.stats()["truncated_texts"] == 1


def test_decode_batch_rejects_what_is_not_a_batch():
    with pytest.raises(ValueError):
        runlens.decode_batch(b"")
    with pytest.raises(ValueError):
        runlens.decode_batch(b"\xff" * 64)


def test_invalid_identity_raises_at_construction(dead_endpoint):
    with pytest.raises(ValueError):
        runlens.Emitter(dead_endpoint, run_id="", rank=0, world_size=1)
    with pytest.raises(ValueError):
        runlens.Emitter(dead_endpoint, run_id="r", rank=4, world_size=4)


def test_concurrent_producers_lose_nothing_uncounted(collector):
    """The rings are multi-producer: events from several C++ threads at once
    arrive intact and exactly once, or are counted as dropped."""
    em = make(collector, buffer_capacity=[1024, 1 << 16, 1024, 1024])
    threads, per_thread = 4, 20_000
    taken = em._native._emit_steps_from_threads(threads, per_thread)
    em.close(timeout=30)
    stats = em.stats()
    assert stats["emitted"]["p1"] == threads * per_thread
    assert taken + stats["dropped"]["p1"] >= threads * per_thread
    events = collector.collect(lambda ev: len(ev) >= stats["sent"], timeout=60)
    assert len(events) == stats["sent"] == threads * per_thread - stats["dropped"]["p1"]
    steps = [e["step"] for e in events]
    assert len(set(steps)) == len(steps)  # exactly once
    for e in events:  # each slot was filled by one producer, not torn between two
        assert e["step_ms"] == e["step"] / 2
        assert e["dataset_shard"] == f"t{e['step'] // per_thread}"


def test_non_finite_val_loss_alone_is_run_health(dead_endpoint):
    # docs/telemetry.md: only loss, grad_norm and the counts make a train row P0
    em = runlens.Emitter(dead_endpoint, run_id="r1", rank=1, world_size=2)
    em.emit("train", step=1, loss=1.0, val_loss=float("nan"))
    assert em.stats()["emitted"]["p1"] == 1
    em.close(timeout=0)


def test_batches_carry_the_emitters_progress_and_close_sends_a_final_batch(collector):
    em = make(collector, rank=1)
    before = time.time_ns()
    for i in range(5):
        assert em.emit("step", step=i, step_ms=1.0)
    assert em.close(timeout=10)
    progress = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (progress and progress[-1]["final"]):
        if collector.socket.poll(100):
            progress.append(runlens.decode_progress(collector.socket.recv()))
    assert progress and progress[-1]["final"]
    assert [p["seq"] for p in progress] == list(range(1, len(progress) + 1))
    assert all(not p["final"] for p in progress[:-1])
    producers = {p["producer"] for p in progress}
    assert len(producers) == 1 and producers.pop().startswith("r1/1/")
    marks = [p["watermark_ns"] for p in progress]
    assert marks == sorted(marks) and marks[-1] >= before
