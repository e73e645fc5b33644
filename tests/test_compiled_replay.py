"""The prepared replay compiled by inductor (issue 42, Note [Compiled replay]): held to the
plain replay (its oracle) on CPU, checked first and compiled outside any capture, one
graph per signature and replay, and a failed compile falls back to the plain replay with
one warning."""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_trt_ref
from torch_trt_ref.runtime import cuda_graphs
from torch_trt_ref.runtime.module import EngineModule
from torch_trt_ref.runtime.reference import compiled_replay
from torch_trt_ref.runtime.reference.replay import ReferenceRunner


class ConvBnNet(torch.nn.Module):
    """A conv, a batch norm and relu (one fused tail under inductor), a residual add, a
    linear with its bias."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.skip = torch.nn.Conv2d(3, 8, 1)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x))) + self.skip(x)
        return self.head(torch.nn.functional.hardswish(y).mean((2, 3)))


@pytest.fixture(scope="module")
def program():
    torch.manual_seed(0)
    model = ConvBnNet().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 8, 8)
    compiled = torch_trt_ref.compile(model, [x], executor="reference", min_block_size=1)
    return model, x, compiled


def runner_of(compiled, settings) -> tuple[ReferenceRunner, dict]:
    (engine,) = [m for m in compiled.modules() if isinstance(m, EngineModule)]
    snapshot = engine.engine.snapshot
    return ReferenceRunner(snapshot, "e", settings), snapshot


def test_the_compiled_replay_equals_the_plain_replay_on_cpu(program, monkeypatch):
    # aot_eager: dynamo's trace of the replay and torch's decompositions, without inductor's
    # C++ code generation (a minute on 2 cores; the next test runs inductor on a tiny net)
    monkeypatch.setattr(compiled_replay, "BACKEND", "aot_eager")
    _, x, compiled = program
    plain, snapshot = runner_of(compiled, cuda_graphs.GraphSettings(False, 8, "plain"))
    fast, _ = runner_of(compiled, cuda_graphs.GraphSettings(False, 8, "inductor"))
    named = {snapshot.inputs[0].name: x}
    want = plain(named)
    first = fast(named)  # the checked plain run; it compiles the replay for this signature
    assert fast.checked and list(fast.compiled.compiled.values()) != [None]
    assert all(torch.equal(a, b) for a, b in zip(first, want))
    for _ in range(2):
        x2 = torch.randn_like(x)
        named2 = {snapshot.inputs[0].name: x2}
        got, ref = fast(named2), plain(named2)  # now the compiled replay: rounding apart
        assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-5) for a, b in zip(got, ref))
    calls = []
    fn = fast.compiled.compiled[next(iter(fast.compiled.compiled))]
    fast.compiled.compiled = {k: (lambda *a, fn=fn: (calls.append(1), fn(*a))[1])
                              for k in fast.compiled.compiled}
    fast(named)
    assert calls == [1]  # the compiled replay ran, not the plain one


def test_inductor_compiles_the_replay_of_a_tiny_network_on_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    x = torch.randn(2, 8)
    compiled = torch_trt_ref.compile(model, [x], executor="reference", min_block_size=1)
    plain, snapshot = runner_of(compiled, cuda_graphs.GraphSettings(False, 8, "plain"))
    fast, _ = runner_of(compiled, cuda_graphs.GraphSettings(False, 8, "inductor"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed compile (its warning) fails the test
        fast({snapshot.inputs[0].name: x})
    assert list(fast.compiled.compiled.values()) == [fast.compiled.fn]
    y = {snapshot.inputs[0].name: torch.randn(2, 8)}
    (got,), (want,) = fast(y), plain(y)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6) and (got == 0).any()


def test_a_gather_traces_into_one_graph(monkeypatch):
    # the gather's index range check reads the indices on the host; under the trace it is
    # skipped (as in a capture: the checked first run made it), not a graph break per gather
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Linear(8, 4)).eval()
    ids = torch.randint(0, 16, (2, 5))
    compiled = torch_trt_ref.compile(model, [ids], executor="reference", min_block_size=1)
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    monkeypatch.setattr(compiled_replay, "BACKEND", counting)
    plain, snapshot = runner_of(compiled, cuda_graphs.GraphSettings(False, 8, "plain"))
    fast, _ = runner_of(compiled, cuda_graphs.GraphSettings(False, 8, "inductor"))
    assert any(layer.kind == "GATHER" for layer in snapshot.layers)
    name = snapshot.inputs[0].name
    fast({name: ids})
    assert len(graphs) == 1
    other = torch.randint(0, 16, (2, 5))
    assert all(torch.equal(a, b) for a, b in zip(fast({name: other}), plain({name: other})))
    fresh, _ = runner_of(compiled, cuda_graphs.GraphSettings(False, 8, "inductor"))
    with pytest.raises(IndexError, match=r"gather index out of range \[-16, 16\)"):
        fresh({name: torch.full((2, 5), 16)})  # the checked first run still checks


def test_each_engine_replay_has_its_own_code_object(program):
    _, _, compiled = program
    a, _ = runner_of(compiled, cuda_graphs.GraphSettings(False, 8, "inductor"))
    b, _ = runner_of(compiled, cuda_graphs.GraphSettings(False, 8, "inductor"))
    one = compiled_replay.CompiledReplay(a.prepared, "a", backend="eager")
    two = compiled_replay.CompiledReplay(b.prepared, "b", backend="eager")
    assert one.fn._torchdynamo_orig_callable.__code__ is not \
        two.fn._torchdynamo_orig_callable.__code__


def test_a_failed_compile_keeps_the_plain_replay_with_one_warning(program, monkeypatch):
    _, x, compiled = program
    runner, snapshot = runner_of(compiled, cuda_graphs.GraphSettings(False, 8, "inductor"))

    def no_compiler(gm, example_inputs):
        raise RuntimeError("no C++ compiler found\nmore")

    monkeypatch.setattr(compiled_replay, "BACKEND", no_compiler)
    named = {snapshot.inputs[0].name: x}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        first = runner(named)
        again = runner(named)
    messages = [str(w.message) for w in seen if "compiling the replay" in str(w.message)]
    assert len(messages) == 1 and "with no_compiler failed (RuntimeError: no C++ compiler " \
        "found)" in messages[0]
    assert "plain replay runs" in messages[0]
    assert all(torch.equal(a, b) for a, b in zip(first, again))


def test_the_replay_setting_is_validated_and_shared(program, monkeypatch):
    _, x, compiled = program
    with pytest.raises(ValueError, match="replay must be one of plain, inductor; got 'fast'"):
        cuda_graphs.set_cuda_graphs(compiled, True, replay="fast")
    settings = cuda_graphs.set_cuda_graphs(compiled, True, replay="inductor")
    handles = [m.handle for m in compiled.modules() if hasattr(m, "handle")]
    assert all(h.graph_settings is settings and h.graph_settings.replay == "inductor"
               for h in handles)
    cuda_graphs.set_cuda_graphs(compiled, True, replay="plain")
    monkeypatch.setenv("TORCH_TRT_REF_REPLAY", "turbo")
    with pytest.raises(ValueError, match=r"\$TORCH_TRT_REF_REPLAY must be one of plain, "):
        cuda_graphs.GraphSettings.default()
    monkeypatch.setenv("TORCH_TRT_REF_REPLAY", "inductor")
    assert cuda_graphs.GraphSettings.default().replay == "inductor"


def test_graphs_are_kept_per_signature_and_replay(program):
    _, x, compiled = program
    runner, snapshot = runner_of(compiled, cuda_graphs.GraphSettings(True, 8, "plain"))
    made = []

    class Fake:
        def __init__(self, fn, inputs, pool=None):
            fn(inputs)  # the warm-up call: the checked run, and the compile for "inductor"
            self.fn = fn
            made.append(runner.graphs.settings.replay)

        def __call__(self, inputs):
            return self.fn(inputs)

    runner.graphs.capture = Fake
    inputs = [x]
    runner.graphs(inputs, (cuda_graphs.signature(inputs), "plain"))
    runner.graphs.settings.replay = "inductor"
    runner.compiled = compiled_replay.CompiledReplay(runner.prepared, "e", backend="eager")
    runner.graphs(inputs, (cuda_graphs.signature(inputs), "inductor"))
    runner.graphs(inputs, (cuda_graphs.signature(inputs), "inductor"))
    assert made == ["plain", "inductor"] and len(runner.graphs.replays) == 2
    assert list(runner.compiled.compiled.values())[0] is not None  # compiled in the warm-up


def test_an_fp32_bias_is_added_apart_from_a_small_gemm_under_inductor():
    # Note [Bias apart under inductor]: the traced replay adds a linear's bias after the
    # product's reshape, which inductor's mm + add -> addmm pattern cannot reach (shown
    # fusing the direct mm + add below); the plain replay keeps addmm, and both agree
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 6)).eval()
    x = torch.randn(2, 5, 8)
    compiled = torch_trt_ref.compile(model, [x], executor="reference", min_block_size=1)
    plain, snapshot = runner_of(compiled, cuda_graphs.GraphSettings(False, 8, "plain"))
    name = snapshot.inputs[0].name
    plain({name: x})  # the checked run
    seen = []
    real_addmm = torch.addmm
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch, "addmm", lambda *a, **k: (seen.append(1), real_addmm(*a, **k))[1])
        (want,) = plain({name: x})
    assert seen == [1]  # the plain replay: one GEMM with the bias in it
    replay = compiled_replay.CompiledReplay(plain.prepared, "t")
    (got,), codes = run_and_get_code(replay.fn, x)
    assert "extern_kernels.mm(" in codes[0] and "addmm" not in codes[0]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(want, model(x), rtol=1e-5, atol=1e-6)
    w, b = torch.randn(8, 6), torch.randn(6)
    _, direct = run_and_get_code(torch.compile(lambda r: torch.mm(r, w) + b), x[0])
    assert "addmm" in direct[0]  # what the replay's add after the reshape avoids
