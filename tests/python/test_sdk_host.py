"""Host samples from Python (docs/sdk.md, "Host samples"): off when the
environment or the option says so, and then no node record is sent. The
samples themselves are tested in C++ (tests/sdk/host_sampler_test.cc), on a
lock file of their own: a test here would contend for the host's."""

import runlens


def test_off_by_environment_or_option_sends_no_node_records(collector, monkeypatch):
    monkeypatch.setenv("RUNLENS_HOST_SAMPLES", "0")
    by_env = runlens.Emitter(collector.endpoint, run_id="host-1", rank=0, world_size=2, node="n0")
    by_option = runlens.Emitter(collector.endpoint, run_id="host-1", rank=1, world_size=2, node="n0",
                                host_samples=False)
    for em in (by_env, by_option):
        assert em.emit("step", step=1, step_ms=1.0)
    stats = [em.stats() for em in (by_env, by_option)]
    assert [s["host_sampler"] for s in stats] == [False, False]
    assert [s["host_samples"] for s in stats] == [0, 0]
    assert [s["host_read_errors"] for s in stats] == [0, 0]
    assert by_option.close(timeout=10) and by_env.close(timeout=10)
    collector.collect(lambda ev: len(ev) >= 4, timeout=10)
    events = collector.collect()  # and whatever else would come in the next 0.5 s
    assert sorted(e["type"] for e in events) == ["run_end", "run_start", "step", "step"]
