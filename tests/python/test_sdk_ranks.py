"""run_start's rank entries: optional gpu_model and node_type, given or filled
by the SDK for the entries on the emitter's own node (docs/sdk.md), absent
otherwise."""

import sys
import types

import pytest

import runlens
from conftest import has_run_end


def run_start(collector, **kw):
    em = runlens.Emitter(collector.endpoint, run_id="ranks-1", rank=0, world_size=4, **kw)
    assert em.close(timeout=10)
    collector.collect(has_run_end)
    (start,) = collector.of_type("run_start")
    return start["ranks"]


@pytest.fixture
def fake_cuda(monkeypatch):
    """A torch module, already imported, whose CUDA has two GPUs."""
    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: 2,
        get_device_name=lambda i: f"Fake GPU {i}",
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))


def test_given_gpu_model_and_node_type_go_on_the_wire_and_unknown_ones_stay_absent(collector):
    ranks = run_start(collector, node="n9", ranks=[
        (0, "n0", 0, "NVIDIA H100 80GB HBM3", "p5.48xlarge"),
        {"rank": 1, "node": "n0", "gpu": 1, "gpu_model": "NVIDIA H100 80GB HBM3"},
        {"rank": 2, "node": "n1", "gpu": 0, "node_type": "p4d.24xlarge"},
        (3, "n1", 1),
    ])
    assert ranks == [
        {"rank": 0, "node": "n0", "gpu": 0, "gpu_model": "NVIDIA H100 80GB HBM3", "node_type": "p5.48xlarge"},
        {"rank": 1, "node": "n0", "gpu": 1, "gpu_model": "NVIDIA H100 80GB HBM3"},
        {"rank": 2, "node": "n1", "gpu": 0, "node_type": "p4d.24xlarge"},
        {"rank": 3, "node": "n1", "gpu": 1},
    ]


def test_the_sdk_fills_its_own_nodes_entries_from_torch_and_the_environment(collector, fake_cuda, monkeypatch):
    monkeypatch.setenv("RUNLENS_NODE_TYPE", "gpu-large")
    ranks = run_start(collector, node="n0", ranks=[
        (0, "n0", 0), (1, "n0", 1, "Given", None), (2, "n1", 0), (3, "n0", 7),
    ])
    assert ranks == [
        {"rank": 0, "node": "n0", "gpu": 0, "gpu_model": "Fake GPU 0", "node_type": "gpu-large"},
        {"rank": 1, "node": "n0", "gpu": 1, "gpu_model": "Given", "node_type": "gpu-large"},
        {"rank": 2, "node": "n1", "gpu": 0},  # another host: this process cannot know
        {"rank": 3, "node": "n0", "gpu": 7, "node_type": "gpu-large"},  # no such local GPU
    ]


def test_without_torch_or_cuda_gpu_model_is_absent(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert runlens._local_gpu_model(0) is None  # torch is never imported by the SDK
    assert "torch" not in sys.modules
    cuda = types.SimpleNamespace(is_available=lambda: False)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert runlens._local_gpu_model(0) is None
    broken = types.SimpleNamespace(is_available=lambda: 1 / 0)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=broken))
    assert runlens._local_gpu_model(0) is None  # never raises


def test_a_bad_rank_entry_raises_before_training_starts(collector):
    with pytest.raises(ValueError, match="each entry is"):
        runlens.Emitter(collector.endpoint, run_id="ranks-2", rank=0, world_size=2, ranks=[(0, "n0")])
