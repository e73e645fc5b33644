"""The runtime's GPU path, checked on the CPU (issue 27): a saved program loads and runs in
a process where TensorRT cannot be imported; ``EngineModule.to`` moves engine weights once
(a device move, never a dtype cast); the prepared plan equals ``run_snapshot`` (its fused
multiply-adds within rounding) and checks layers on the first call of each signature only;
CUDA-graph caching (bounded, per signature, the uncaptured fallback) with a capture function
standing in for CUDA; graphs stay off on CPU and when turned off; the torch floor's error;
and ``zoo save`` / ``zoo latency``'s pieces. GPU timings live in perf-data/results/gpu/."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import warnings

import pytest
import torch

import torch_trt_ref
from torch_trt_ref.runtime import cuda_graphs, opaque
from torch_trt_ref.runtime.module import EngineModule
from torch_trt_ref.runtime.reference.executor import run_snapshot
from torch_trt_ref.runtime.reference.replay import ReferenceRunner, snapshot_device


class ConvBnNet(torch.nn.Module):
    """A conv, a batch norm (a PROD + SUM pair in the engine), a linear with its bias."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.head(y.mean((2, 3)))


@pytest.fixture(scope="module")
def program():
    torch.manual_seed(0)
    model = ConvBnNet().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 16, 16)
    compiled = torch_trt_ref.compile(model, [x], executor="reference", min_block_size=1)
    return model, x, compiled


def engines(compiled) -> list[EngineModule]:
    return [m for m in compiled.modules() if isinstance(m, EngineModule)]


def test_a_saved_program_runs_where_tensorrt_cannot_be_imported(program, tmp_path):
    model, x, compiled = program
    path = torch_trt_ref.save(compiled, tmp_path / "p.prog", plans=False)
    torch.save({"x": x, "want": compiled(x)}, tmp_path / "io.pt")
    code = f"""
import sys, warnings
sys.modules["tensorrt"] = sys.modules["tensorrt_rtx"] = None  # neither can be imported
import torch, torch_trt_ref
from torch_trt_ref._trt import HAS_TENSORRT, trt
assert not HAS_TENSORRT and torch_trt_ref.TRT_BACKEND == "none"
io = torch.load({str(tmp_path / "io.pt")!r})
with warnings.catch_warnings(record=True):
    loaded = torch_trt_ref.load({str(path)!r})
with torch.no_grad():
    got = loaded(io["x"])
assert torch.equal(got, io["want"]), (got - io["want"]).abs().max()
try:
    trt.Builder(None)
except ImportError as err:
    print("builder:", err)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Builder needs TensorRT, which is not installed" in done.stdout
    assert "install either 'tensorrt'" in done.stdout


def test_a_program_saved_without_plans_is_smaller_and_runs_on_the_reference(program, tmp_path):
    _, x, compiled = program
    full = torch_trt_ref.save(compiled, tmp_path / "full.prog")
    slim = torch_trt_ref.save(compiled, tmp_path / "slim.prog", plans=False)
    assert slim.stat().st_size < full.stat().st_size
    loaded = torch_trt_ref.load(slim)
    assert set(torch_trt_ref.executors_used(loaded).values()) == {"reference"}
    with torch.no_grad():
        assert torch.equal(loaded(x), compiled(x))


def test_to_moves_engine_weights_once_and_a_dtype_cast_leaves_them(program, tmp_path):
    _, x, compiled = program
    loaded = torch_trt_ref.load(torch_trt_ref.save(compiled, tmp_path / "p.prog"))
    (engine,) = engines(loaded)
    snapshot = engine.engine.snapshot
    dtypes = [v.dtype for layer in snapshot.layers for v in layer.attrs.values()
              if isinstance(v, torch.Tensor)]
    loaded.half()  # the engine's precision was fixed at build: its weights keep theirs
    assert [v.dtype for layer in snapshot.layers for v in layer.attrs.values()
            if isinstance(v, torch.Tensor)] == dtypes
    loaded.to("meta")  # a device move (meta stands in for a GPU here)
    assert snapshot_device(snapshot) == torch.device("meta")
    assert all(v.device.type == "meta" for layer in snapshot.layers
               for v in layer.attrs.values() if isinstance(v, torch.Tensor))
    assert engine.handle.device() == torch.device("meta")


def test_weights_are_not_copied_per_call(program, monkeypatch):
    _, x, compiled = program
    (engine,) = engines(compiled)
    with torch.no_grad():
        compiled(x)
        weights = {id(v) for layer in engine.engine.snapshot.layers
                   for v in layer.attrs.values() if isinstance(v, torch.Tensor)}
        moved = []
        original = torch.Tensor.to
        monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: (
            moved.append(id(self)) if id(self) in weights else None,
            original(self, *a, **k))[1])
        compiled(x)
    assert not moved


def test_the_prepared_plan_equals_run_snapshot_and_checks_once(program):
    _, x, compiled = program
    (engine,) = engines(compiled)
    snapshot = engine.engine.snapshot
    named = {snapshot.inputs[0].name: x}
    want = run_snapshot(snapshot, dict(named))
    runner = ReferenceRunner(snapshot)
    assert len(runner.prepared.fast) < len(runner.prepared.calls)  # bn's PROD + SUM fused
    fused = {fn.__name__ for fn, *_ in runner.prepared.fast}
    assert {"_multiply_add", "_matmul_bias"} <= fused
    first = runner(named)  # checked: each call's outputs against TensorRT's shapes
    assert runner.checked == {((tuple(x.shape), x.dtype),)}
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(first, want))
    again = runner(named)
    assert all(torch.equal(a, b) for a, b in zip(again, first))  # the same on every call


def test_a_linear_bias_goes_to_addmm_as_a_vector(program, monkeypatch):
    # torch's CUDA addmm adds only a 1-D bias in cuBLASLt's GEMM epilogue; a (1, n) bias
    # costs a broadcast copy into the output first (aten/src/ATen/native/cuda/Blas.cpp)
    _, x, compiled = program
    (engine,) = engines(compiled)
    runner = ReferenceRunner(engine.engine.snapshot)
    seen, addmm = [], torch.addmm
    monkeypatch.setattr(torch, "addmm", lambda bias, *a, **k: (seen.append(bias.dim()),
                                                               addmm(bias, *a, **k))[1])
    runner({engine.engine.snapshot.inputs[0].name: x})
    assert seen == [1]


class FakeReplay:
    """Stands in for ``_Replay`` (no CUDA here): counts captures and replays."""

    made: list = []

    def __init__(self, fn, inputs, pool=None):
        self.fn, self.calls = fn, 0
        FakeReplay.made.append(self)

    def __call__(self, inputs):
        self.calls += 1
        return self.fn(inputs)


def test_graphs_are_cached_per_signature_and_bounded():
    FakeReplay.made = []
    graphs = cuda_graphs.EngineGraphs(lambda xs: [xs[0] * 2], "e", FakeReplay,
                                      cuda_graphs.GraphSettings(True, cache_size=2))
    for n in (1, 2, 1, 3, 2):
        assert torch.equal(graphs([torch.ones(n)])[0], torch.full((n,), 2.0))
    sizes = [key[0][0] for key in graphs.replays]
    assert sizes == [(3,), (2,)]  # least recently used (size 1) went first
    assert len(FakeReplay.made) == 4  # 1, 2, 3, then 2 again after its eviction


def test_a_smaller_cache_size_frees_graphs_at_once(program, tmp_path):
    """set_cuda_graphs(cache_size=k) keeps only the k most recently used graphs an engine
    already holds (hits alone would never evict them)."""
    _, x, compiled = program
    other = torch_trt_ref.load(torch_trt_ref.save(compiled, tmp_path / "p.prog"))
    with torch.no_grad():
        other(x)  # makes the engine's runner
    settings = cuda_graphs.set_cuda_graphs(other, True, cache_size=3)
    graphs = engines(other)[0].handle._reference.graphs
    graphs.capture, graphs.fn = FakeReplay, lambda xs: xs  # stand-ins: no CUDA here
    for n in (1, 2, 3):
        graphs([torch.ones(n)])
    graphs([torch.ones(1)])  # 1 is now the most recently used
    assert settings is cuda_graphs.set_cuda_graphs(other, True, cache_size=2)
    assert [key[0][0] for key in graphs.replays] == [(3,), (1,)]


def test_a_failed_capture_runs_uncaptured_with_one_warning():
    def refuse(fn, inputs, pool=None):
        raise RuntimeError("operation not permitted when stream is capturing")

    graphs = cuda_graphs.EngineGraphs(lambda xs: [xs[0] + 1], "engine e", refuse)
    with pytest.warns(UserWarning, match="engine e: CUDA graph capture failed"):
        out = graphs([torch.zeros(3)])
    assert torch.equal(out[0], torch.ones(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(graphs([torch.zeros(3)])[0], torch.ones(3))
    assert list(graphs.replays.values()) == [None]


def test_graphs_are_off_on_cpu_and_when_turned_off(program, monkeypatch):
    _, x, compiled = program
    (engine,) = engines(compiled)
    with torch.no_grad():
        compiled(x)
    assert not engine.handle._reference.graphs.replays  # CPU inputs: never captured
    whole = cuda_graphs.whole_module(compiled, FakeReplay)
    FakeReplay.made = []
    with torch.no_grad():
        assert torch.equal(whole(x), compiled(x))
    assert not FakeReplay.made
    with cuda_graphs.cuda_graphs(False):
        assert not cuda_graphs.graphs_enabled()
    assert cuda_graphs.graphs_enabled()
    with pytest.raises(ValueError, match="cache_size must be >= 1"):
        cuda_graphs.set_cuda_graphs(compiled, True, cache_size=0)


def test_the_graph_setting_is_per_program(program, tmp_path):
    _, x, compiled = program
    other = torch_trt_ref.load(torch_trt_ref.save(compiled, tmp_path / "p.prog"))
    with torch.no_grad():
        other(x)  # its runner exists before the setting changes: it follows the change
    settings = cuda_graphs.set_cuda_graphs(other, False, cache_size=3)
    whole = cuda_graphs.whole_module(other, FakeReplay)
    runner = engines(other)[0].handle._reference
    assert runner.graphs.settings is settings and whole.graph_settings is settings
    assert not cuda_graphs.graphs_enabled(settings) and settings.cache_size == 3
    assert cuda_graphs.graphs_enabled(engines(compiled)[0].handle.graph_settings)  # untouched
    with cuda_graphs.cuda_graphs(True):  # a block overrides every program, in this thread
        assert cuda_graphs.graphs_enabled(settings)
    assert not cuda_graphs.graphs_enabled(settings)
    cuda_graphs.set_cuda_graphs(other, True)
    assert cuda_graphs.graphs_enabled(runner.graphs.settings) and settings.cache_size == 3
    with pytest.raises(TypeError, match="set_cuda_graphs takes a compiled or loaded module"):
        cuda_graphs.set_cuda_graphs(torch.nn.Linear(2, 2), False)


def test_engines_run_without_the_op_on_a_torch_without_opaque_objects(program, monkeypatch):
    _, x, compiled = program
    from torch_trt_ref.runtime import module

    monkeypatch.setattr(module, "HAS_OPAQUE_HANDLES", False)
    with torch.no_grad():
        want = compiled(x)
    monkeypatch.setattr(opaque, "HAS_OPAQUE_HANDLES", False)
    monkeypatch.setattr(opaque, "_MISSING", "ImportError: no torch._custom_class_base")
    with pytest.raises(opaque.OpaqueHandlesUnavailable, match=r"compiling needs torch >= 2\.14"):
        torch_trt_ref.compile(ConvBnNet().eval(), [x])
    assert want.shape == (2, 4)


def test_zoo_latency_pieces(tmp_path):
    from zoo import cli, gpu_latency

    args, _ = gpu_latency.batched_inputs("resnet18", 3)
    assert args[0].shape == (3, 3, 224, 224)
    tokens, _ = gpu_latency.batched_inputs("bert_2layer", 4)
    assert tokens[0].shape[0] == 4 and not tokens[0].is_floating_point()
    lat = {k: {"median_ms": m, "p90_ms": m * 1.1} for k, m in
           (("eager", 2.0), ("inductor", 1.0), ("ours_engine_graphs", 0.5))}
    record = {"program": "m-fp16-b1.prog", "status": "ok", "executors": ["reference"],
              "latency": lat, "accuracy": {"passed": True, "ratio": 1.1},
              "env": {"gpu": "G", "driver": "d", "torch": "t", "tensorrt": "none"}}
    table = gpu_latency.markdown([record])
    assert "| m-fp16-b1.prog | reference | ok (1.10 / -) |" in table
    assert "0.25x | 0.50x |" in table
    parser = argparse.ArgumentParser()
    cli.add_subcommands(parser.add_subparsers(dest="command"))
    parsed = parser.parse_args(["zoo", "latency", str(tmp_path), "--device", "cuda"])
    if not torch.cuda.is_available():
        assert parsed.func(parsed) == 2  # no CUDA device: a clear refusal
    parsed = parser.parse_args(["zoo", "latency", str(tmp_path), "--device", "cpu"])
    assert parsed.func(parsed) == 2  # no programs in the folder
    records = tmp_path / "lat.jsonl"  # what `zoo report` reads
    records.write_text(json.dumps({"schema_version": 2, "kind": "gpu_latency", **record}))
    parsed = parser.parse_args(["zoo", "report", str(records)])
    assert parsed.func(parsed) == 0
