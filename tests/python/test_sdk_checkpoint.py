"""em.checkpoint_saved(path, step): the file is hashed on a background thread
(never in the training loop) and the `checkpoint` event carries its uri and
sha256; a missing file or a full queue is counted, never raised."""

import hashlib
import os
import pathlib
import statistics
import threading
import time

import runlens
from conftest import has_run_end


def _write(path, size, seed=1):
    block = hashlib.sha256(str(seed).encode()).digest() * (1 << 15)  # 1 MiB
    with open(path, "wb") as f:
        for _ in range(size >> 20):
            f.write(block)
        f.write(block[: size & ((1 << 20) - 1)])
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def test_event_carries_the_files_hash_and_uri(collector, tmp_path):
    path = tmp_path / "model step 3.pt"  # a space: percent-encoded in the URI
    digest = _write(path, 3 * 1000 * 1000 + 7)
    em = runlens.Emitter(collector.endpoint, run_id="ck1", rank=0, world_size=1)
    t0 = time.time_ns()
    assert em.checkpoint_saved(path, 3, duration_ms=12.5) is True
    assert em.checkpoint_saved(str(path), step=4, checkpoint_id="ckpt-4") is True
    em.close(timeout=10)
    collector.collect(until=has_run_end, timeout=20)
    events = collector.of_type("checkpoint")
    assert len(events) == 2
    a, b = sorted(events, key=lambda e: e["step"])
    assert a["checkpoint_id"] == "ck1/step-3" and a["step"] == 3 and b["checkpoint_id"] == "ckpt-4"
    assert a["sha256"] == b["sha256"] == digest
    assert a["uri"] == "file://" + str(path).replace(" ", "%20") == path.as_uri()
    assert a["size_bytes"] == 3 * 1000 * 1000 + 7 and a["ok"] is True and a["duration_ms"] == 12.5
    assert t0 <= a["time_ns"] <= time.time_ns()  # the time of the call, not of the hash
    stats = em.stats()
    assert stats["checkpoints_queued"] == 2 and stats["checkpoints_hashed"] == 2
    assert stats["checkpoints_dropped"] == 0 and stats["checkpoint_errors"] == 0


def test_the_call_returns_in_microseconds_for_a_large_file(collector, tmp_path):
    path = tmp_path / "big.pt"
    digest = _write(path, 256 << 20)  # 256 MiB: about a second of SHA-256
    em = runlens.Emitter(collector.endpoint, run_id="ck2", rank=0, world_size=1)
    em.checkpoint_saved(tmp_path / "warm-up-missing", 0)  # starts the thread
    times = []
    main = threading.get_ident()
    for step in range(1, 6):
        t0 = time.perf_counter_ns()
        em.checkpoint_saved(path, step)
        times.append((time.perf_counter_ns() - t0) / 1000)
    assert threading.get_ident() == main
    # Generous bounds for a loaded 2-core machine; hashing 256 MiB in the call
    # would take hundreds of milliseconds.
    assert statistics.median(times) < 1000, times
    assert max(times) < 200_000, times
    em.close(timeout=60)
    collector.collect(until=has_run_end, timeout=60)
    sent = [e for e in collector.of_type("checkpoint") if e.get("ok")]
    assert [e["sha256"] for e in sent] == [digest] * 5


def test_missing_file_is_counted_not_raised(collector, tmp_path):
    em = runlens.Emitter(collector.endpoint, run_id="ck3", rank=0, world_size=1)
    assert em.checkpoint_saved(tmp_path / "nope.pt", 7) is True  # queued: the thread finds it missing
    assert em.checkpoint_saved(object(), 8) is False  # not a path: counted
    em.close(timeout=5)
    collector.collect(until=has_run_end, timeout=20)
    (ev,) = collector.of_type("checkpoint")
    assert ev["ok"] is False and "sha256" not in ev and ev["step"] == 7
    stats = em.stats()
    assert stats["checkpoint_errors"] == 1 and stats["checkpoints_hashed"] == 0
    assert stats["sdk_errors"] == 1


def test_a_full_queue_drops_and_counts(dead_endpoint, tmp_path):
    path = tmp_path / "c.pt"
    _write(path, 64 << 20)
    em = runlens.Emitter(dead_endpoint, run_id="ck4", rank=0, world_size=1, checkpoint_queue=2)
    results = [em.checkpoint_saved(path, i) for i in range(20)]
    assert not all(results) and results[0]
    stats = em.stats()
    assert stats["checkpoints_dropped"] == results.count(False) > 0
    t0 = time.monotonic()
    em.close(timeout=0.2)  # what is left unhashed at close is dropped and counted
    assert time.monotonic() - t0 < 5
    stats = em.stats()
    assert stats["checkpoints_queued"] == results.count(True)
    assert stats["checkpoints_hashed"] + stats["checkpoints_dropped"] + stats["checkpoint_errors"] == 20
    hasher = em._state.hasher
    hasher.thread.join(5)
    assert not hasher.thread.is_alive()  # nothing left behind
    assert em.checkpoint_saved(path, 99) is False  # after close: dropped, counted
    assert em.stats()["checkpoints_dropped"] == stats["checkpoints_dropped"] + 1


def test_relative_path_and_unknown_fields(collector, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    digest = _write(tmp_path / "rel.pt", 1000)
    em = runlens.Emitter(collector.endpoint, run_id="ck5", rank=0, world_size=1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert em.checkpoint_saved("rel.pt", 1, sha256="forged", colour="red")
    os.chdir("/")  # the path was resolved at the call
    em.close(timeout=5)
    collector.collect(until=has_run_end, timeout=20)
    (ev,) = collector.of_type("checkpoint")
    assert ev["sha256"] == digest and ev["uri"] == (tmp_path / "rel.pt").as_uri()
    assert em.stats()["unknown_fields"] == 2


def _open_writer(fifo, timeout=10.0):
    """The FIFO's writing end, once the hasher has opened its reading end."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def test_a_slow_hash_holds_the_emitters_watermark_until_its_event_is_sent(collector, tmp_path):
    """The event carries the time of the call but leaves once the file is read:
    until then no batch may promise past that time (the collector would find
    the event late and dead-letter it), while the other events keep flowing."""
    fifo = tmp_path / "slow.pt"
    os.mkfifo(fifo)  # the hasher reads it only as fast as the test writes it
    em = runlens.Emitter(collector.endpoint, run_id="ck-hold", rank=0, world_size=1, flush_interval_ms=10)
    assert em.checkpoint_saved(fifo, 5) is True
    batches = []

    def receive(seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if collector.socket.poll(20):
                data = collector.socket.recv()
                batches.append((runlens.decode_progress(data), runlens.decode_batch(data)))

    fd = _open_writer(fifo)
    for step in range(6, 16):  # flushed every 10 ms while the hash waits
        em.emit("step", step=step, step_ms=1.0)
        receive(0.03)
    os.write(fd, b"x" * 4096)
    os.close(fd)  # end of file: the hash completes
    receive(0.3)  # the checkpoint, then heartbeats past it
    em.close(timeout=10)
    while not (batches and batches[-1][0]["final"]) and collector.socket.poll(5000):
        data = collector.socket.recv()
        batches.append((runlens.decode_progress(data), runlens.decode_batch(data)))
    assert batches and batches[-1][0]["final"]
    (at,) = [i for i, (_, events) in enumerate(batches) if any(e["type"] == "checkpoint" for e in events)]
    (checkpoint,) = [e for e in batches[at][1] if e["type"] == "checkpoint"]
    assert checkpoint["sha256"] == hashlib.sha256(b"x" * 4096).hexdigest()
    # The steps went out before it, in batches that promised nothing past it.
    assert sum(e["type"] == "step" for _, events in batches[:at] for e in events) == 10
    before = [p["watermark_ns"] for p, _ in batches[: at + 1]]
    assert max(before) <= checkpoint["time_ns"], (max(before) - checkpoint["time_ns"]) / 1e6
    assert max(p["watermark_ns"] for p, _ in batches) > checkpoint["time_ns"]  # and progress resumes
    stats = em.stats()
    assert stats["checkpoints_hashed"] == 1 and stats["checkpoints_dropped"] == 0


def test_a_checkpoint_given_up_at_close_holds_nothing_back(dead_endpoint, tmp_path):
    fifo = tmp_path / "never-written.pt"
    os.mkfifo(fifo)  # the hasher waits in open() until a writer comes
    em = runlens.Emitter(dead_endpoint, run_id="ck-gone", rank=0, world_size=1)
    assert em.checkpoint_saved(fifo, 1) is True
    hasher = em._state.hasher
    assert len(hasher.holds) == 1
    em.close(timeout=0.3)  # the hash never ends: given up, counted, released
    assert hasher.holds == set()
    assert em.stats()["checkpoints_dropped"] == 1
    os.close(_open_writer(fifo))  # lets the hasher thread see its end
    hasher.thread.join(5)
    assert not hasher.thread.is_alive()
