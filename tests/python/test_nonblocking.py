"""Telemetry never breaks training: no collector, odd endpoints, a collector
that dies, full buffers, and close() within its timeout. Time limits here are
generous upper bounds for a loaded 2-core machine: they catch a call that
blocks (seconds), not one that is merely slow."""

import time

import pytest

import runlens
from conftest import Collector, free_tcp_port, has_run_end

ALL = ("p0", "p1", "p2", "p3")


def test_emit_never_blocks_without_a_collector(dead_endpoint):
    em = runlens.Emitter(dead_endpoint, run_id="r1", rank=0, world_size=1)
    n = 50_000
    t0 = time.monotonic()
    for i in range(n):
        em.emit("step", step=i, step_ms=1.0)
    elapsed = time.monotonic() - t0
    assert elapsed < 30.0
    stats = em.stats()
    assert stats["emitted"]["p1"] == n
    assert stats["dropped"]["p1"] > 0  # nobody listens: the ring filled up
    t0 = time.monotonic()
    em.close(timeout=0.5)
    assert time.monotonic() - t0 < 5.0
    stats = em.stats()
    # every event is accounted for: sent (queued in ZeroMQ) or dropped and counted
    assert sum(stats["emitted"].values()) == stats["sent"] + sum(stats["dropped"].values())


def test_step_scopes_without_a_collector(dead_endpoint):
    em = runlens.Emitter(dead_endpoint, run_id="r1", rank=0, world_size=1)
    for i in range(2_000):
        with em.step(i) as s:
            with s.phase("forward"):
                pass
            s.train(loss=1.0)
    assert em.stats()["sdk_errors"] == 0
    em.close(timeout=0.2)


@pytest.mark.parametrize(
    "endpoint",
    [
        "",
        "nonsense",
        "tcp://127.0.0.1:notaport",
        "tcp://",
        "udp://127.0.0.1:9",
        "ipc:///nonexistent-runlens-dir/a/b/c.sock",
        "inproc://nobody-binds-this",
        "tcp://127.0.0.1:1",
    ],
)
def test_odd_endpoints_never_raise(endpoint):
    t0 = time.monotonic()
    em = runlens.Emitter(endpoint, run_id="r1", rank=0, world_size=1)
    with em.step(0) as s:
        s.train(loss=1.0)
    em.event("oom", message="x")
    em.close(timeout=0.3)
    assert time.monotonic() - t0 < 10.0
    stats = em.stats()
    assert stats["closed"]
    # nothing was lost without being counted (run_start, step, train, event, run_end)
    emitted = sum(stats["emitted"].values())
    assert emitted == 5
    if stats["connect_error"] is not None:
        assert stats["sent"] == 0 and sum(stats["dropped"].values()) == emitted


def test_unusable_endpoint_reports_why():
    em = runlens.Emitter("nonsense", run_id="r1", rank=1, world_size=2)
    assert "nonsense" in em.stats()["connect_error"]
    em.close(timeout=0)


def test_collector_that_dies_does_not_stop_training(collector):
    em = runlens.Emitter(collector.endpoint, run_id="r1", rank=1, world_size=2, flush_interval_ms=5)
    em.emit("step", step=0, step_ms=1.0)
    collector.collect(lambda ev: ev)
    collector.close()  # the collector goes away
    collector.close = lambda: None  # the fixture's teardown has nothing left to close
    t0 = time.monotonic()
    for i in range(1, 20_001):
        em.emit("step", step=i, step_ms=1.0)
    assert time.monotonic() - t0 < 30.0
    em.close(timeout=0.3)
    stats = em.stats()
    assert stats["emitted"]["p1"] == 20_001
    assert stats["emitted"]["p1"] == stats["sent"] + stats["dropped"]["p1"]


def test_full_buffers_drop_detail_first_and_keep_p0():
    port = free_tcp_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    em = runlens.Emitter(
        endpoint, run_id="r1", rank=0, world_size=1,
        buffer_capacity=[16, 16, 16, 16], batch_size=4, send_hwm=1, flush_interval_ms=5,
    )
    # Nobody listens: ZeroMQ's queue (one batch) and the retried batch fill,
    # then the P2 and P3 rings.
    for i in range(2_000):
        em.emit("data", step=i, batch_load_ms=1.0)
        em.emit("event", kind="debug_note", step=i)
    for i in range(5):
        assert em.event("oom", step=i, message=f"oom {i}")  # P0 has its own room
    stats = em.stats()
    assert stats["dropped"]["p2"] > 0 and stats["dropped"]["p3"] > 0
    assert stats["dropped"]["p0"] == 0

    # The collector comes up: the P0 events kept in their ring get through.
    late = Collector(port)
    try:
        em.close(timeout=20)
        events = late.collect(has_run_end, timeout=30)
        ooms = sorted(e["step"] for e in events if e["type"] == "event" and e["kind"] == "oom")
        assert ooms == [0, 1, 2, 3, 4]
        assert em.stats()["dropped"]["p0"] == 0
    finally:
        late.close()


def test_close_honours_its_timeout(dead_endpoint):
    em = runlens.Emitter(dead_endpoint, run_id="r1", rank=0, world_size=1, send_hwm=1, batch_size=8)
    for i in range(5_000):
        em.emit("step", step=i, step_ms=1.0)
    t0 = time.monotonic()
    clean = em.close(timeout=0.5)
    elapsed = time.monotonic() - t0
    assert elapsed < 0.5 + 3.0
    assert not clean  # nobody listened: what was left was dropped and counted
    stats = em.stats()
    assert stats["closed"]
    assert stats["dropped"]["p1"] > 0
    assert sum(stats["emitted"].values()) == stats["sent"] + sum(stats["dropped"].values())


def test_close_twice_and_emit_after_close(collector):
    em = runlens.Emitter(collector.endpoint, run_id="r1", rank=0, world_size=1)
    assert em.close(timeout=10)
    assert em.close(timeout=10)
    assert em.emit("step", step=1, step_ms=1.0) is False
    assert em.stats()["dropped"]["p1"] == 1
    collector.collect(has_run_end)
    assert len(collector.of_type("run_end")) == 1
