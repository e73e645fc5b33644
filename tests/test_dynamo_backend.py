"""The torch.compile backend ``torch_trt_ref``: models compiled through dynamo equal eager
(float64 rule, ``torch_trt_ref.accuracy.judge``), dynamic sizes become optimization
profiles without recompiling, graph breaks give one compiled graph each, bad options fail
clearly, and a graph the backend cannot take runs eagerly with a warning."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torchvision
import transformers

import torch_trt_ref
from torch_trt_ref import dynamo_backend
from torch_trt_ref.accuracy import judge, to_float64

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _float64(model, args):
    with torch.no_grad():
        return copy.deepcopy(model).double()(*to_float64(args))


def segments(graph) -> tuple[int, int]:
    """(TensorRT, PyTorch) segment counts of a compiled graph."""
    return graph.counts.get("tensorrt", 0), graph.counts.get("torch", 0)


def test_resnet18_through_torch_compile_equals_eager():
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    compiled = torch.compile(model, backend="torch_trt_ref")
    with torch.no_grad():
        out, eager = compiled(x), model(x)
    verdict = judge(out, eager, _float64(model, (x,)))
    assert verdict.passed, verdict.message
    [graph] = dynamo_backend.report().graphs
    assert graph.status == "compiled" and segments(graph) == (1, 0)
    assert graph.module.compile_report.engines, "no engine was built"


def test_bert_dynamic_two_lengths_one_profile():
    """dynamic=True: the sequence length is a symbol whose range dynamo bounds by the
    position table (2..512); one engine with that profile serves both lengths, so dynamo
    does not recompile for the second."""
    config = transformers.BertConfig(hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=128)
    model = transformers.BertModel(config).eval()
    backend = dynamo_backend.Backend()
    compiled = torch.compile(model, backend=backend, dynamic=True)
    gen = torch.Generator().manual_seed(0)
    for length in (16, 27):
        ids = torch.randint(0, config.vocab_size, (1, length), generator=gen)
        with torch.no_grad():
            out, eager = compiled(ids), model(ids)
        verdict = judge(out.to_tuple(), eager.to_tuple(), _float64(model, (ids,)).to_tuple())
        assert verdict.passed, f"length {length}: {verdict.message}"
    assert backend.report.recompiles == 0
    [graph] = backend.report.graphs
    assert graph.status == "compiled" and segments(graph) == (1, 0)
    [spec] = graph.inputs
    assert (spec.min_shape, spec.opt_shape, spec.max_shape) == ((1, 2), (1, 16), (1, 512))
    [engine] = graph.module.compile_report.engines  # the engine's profile is that range
    assert {(tuple(i["min"]), tuple(i["max"])) for i in engine.inputs} == {((1, 2), (1, 512))}


class TwoHalves(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                         torch.nn.Linear(32, 32), torch.nn.GELU(),
                                         torch.nn.Linear(32, 32), torch.nn.Tanh())
        self.second = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                          torch.nn.Linear(32, 32), torch.nn.Sigmoid(),
                                          torch.nn.Linear(32, 8), torch.nn.ReLU())

    def forward(self, x):
        y = self.first(x)
        torch._dynamo.graph_break()
        return self.second(y)


def test_graph_break_gives_two_compiled_graphs_and_new_shape_recompiles():
    model = TwoHalves().eval()
    backend = dynamo_backend.Backend(min_block_size=1)
    compiled = torch.compile(model, backend=backend)
    for batch in (4, 6):  # the second size: dynamo recompiles both frames, dynamic
        x = torch.randn(batch, 16)
        with torch.no_grad():
            verdict = judge(compiled(x), model(x), _float64(model, (x,)))
        assert verdict.passed, verdict.message
    report = backend.report
    assert [g.status for g in report.graphs] == ["compiled"] * 4, report.render()
    assert all(segments(g) == (1, 0) for g in report.graphs)
    assert report.recompiles == 2
    assert [g.recompile for g in report.graphs] == [False, False, True, True]
    static, dynamic = report.graphs[0].inputs[0], report.graphs[2].inputs[0]
    assert not static.is_dynamic and static.shape == (4, 16)
    # dynamo's automatic dynamic leaves the batch unbounded: the profile's max is the
    # dynamic_max_size setting
    assert dynamic.max_shape == (4096, 16) and dynamic.opt_shape == (6, 16)


def test_mark_dynamic_range_is_the_profile_and_options_reach_the_settings():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    x = torch.randn(5, 8)
    torch._dynamo.mark_dynamic(x, 0, min=2, max=64)
    compiled = torch.compile(model, backend="torch_trt_ref",
                             options={"min_block_size": 1, "dynamic_max_size": 32})
    with torch.no_grad():
        assert torch.allclose(compiled(x), model(x), atol=1e-6)
        y = torch.randn(40, 8)  # in mark_dynamic's range: same graph, no recompile
        assert torch.allclose(compiled(y), model(y), atol=1e-6)
    [graph] = dynamo_backend.report().graphs
    [spec] = graph.inputs
    assert (spec.min_shape[0], spec.opt_shape[0], spec.max_shape[0]) == (2, 5, 64)
    assert graph.module.compile_report.settings["min_block_size"] == 1


def test_bad_option_name_is_the_compile_error():
    model = torch.nn.Linear(4, 4).eval()
    with pytest.raises(ValueError, match=r"unknown settings 'precison' \(did you mean "
                                         r"'precision'\?\); accepted: \["):
        torch_trt_ref.compile(model, (torch.randn(2, 4),), precison="fp16")
    compiled = torch.compile(model, backend="torch_trt_ref", options={"precison": "fp16"})
    with pytest.raises(Exception, match=r"unknown settings 'precison' \(did you mean "
                                        r"'precision'\?\); accepted: \[") as info:
        compiled(torch.randn(2, 4))
    assert isinstance(info.value.__cause__ or info.value.inner_exception, ValueError)
    with pytest.raises(ValueError, match="unknown settings 'precison'"):
        dynamo_backend.Backend(precison="fp16")


def scaled(x, n: int):
    return torch.relu(x) * n


def test_backend_failure_runs_eagerly_with_a_warning_unless_full_compilation():
    """An int argument that is no tensor's size cannot become an Input: the graph runs as
    dynamo captured it, with a warning naming why; with require_full_compilation the
    error propagates."""
    x = torch.randn(4, 8)
    backend = dynamo_backend.Backend()
    compiled = torch.compile(scaled, backend=backend, dynamic=True)
    with pytest.warns(UserWarning, match=r"runs in eager PyTorch: TypeError: size input "
                                         r"\w+ \(\w+\) is not the size of a tensor input"):
        out = compiled(x, 3)
    assert torch.equal(out, scaled(x, 3))
    [graph] = backend.report.graphs
    assert graph.status == "eager" and "not the size of a tensor input" in graph.reason
    torch._dynamo.reset()
    strict = torch.compile(scaled, backend=dynamo_backend.Backend(require_full_compilation=True),
                           dynamic=True)
    with pytest.raises(Exception, match="not the size of a tensor input"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            strict(x, 3)


def test_out_of_profile_call_runs_eagerly_with_a_warning():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    x = torch.randn(5, 8)
    torch._dynamo.mark_dynamic(x, 0)
    backend = dynamo_backend.Backend(min_block_size=1, dynamic_max_size=16)
    compiled = torch.compile(model, backend=backend)
    with torch.no_grad():
        compiled(x)
        big = torch.randn(20, 8)
        with pytest.warns(UserWarning, match=r"outside its profile.*dynamic_max_size"):
            assert torch.allclose(compiled(big), model(big), atol=1e-6)
    assert backend.report.graphs[0].out_of_range_calls == 1


def test_entry_point_is_found_without_importing_the_package(tmp_path):
    """torch discovers backends through the ``torch_dynamo_backends`` entry points of
    installed distributions. The entry point declared in pyproject.toml is written into a
    throwaway distribution's metadata (an install would write the same), and a fresh
    interpreter that never imports torch_trt_ref compiles with backend="torch_trt_ref"."""
    with open(os.path.join(ROOT, "pyproject.toml")) as f:  # (tomllib needs Python 3.11)
        section = re.search(r"^\[project\.entry-points\.torch_dynamo_backends\]\n(.*?)^$",
                            f.read(), flags=re.M | re.S).group(1)
    declared = dict(re.findall(r'^(\w+) = "([\w.:]+)"$', section, flags=re.M))
    assert declared == {"torch_trt_ref": "torch_trt_ref.dynamo_backend:torch_trt_ref_backend"}
    dist = tmp_path / "torch_trt_ref_entry_point_check-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: "
                                   "torch_trt_ref_entry_point_check\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(
        "[torch_dynamo_backends]\n" + "".join(f"{k} = {v}\n" for k, v in declared.items()))
    script = textwrap.dedent("""
        import sys, torch
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
        x = torch.randn(2, 8)
        assert "torch_trt_ref" not in sys.modules
        compiled = torch.compile(model, backend="torch_trt_ref", options={"min_block_size": 1})
        assert "torch_trt_ref" in sys.modules  # torch loaded the entry point
        with torch.no_grad():
            assert torch.allclose(compiled(x), model(x), atol=1e-6)
        from torch_trt_ref import dynamo_backend
        print([g.status for g in dynamo_backend.report().graphs])
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), ROOT])}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "['compiled']"


def test_registered_on_import():
    """Importing the package registers the name too (a checkout that is not installed)."""
    assert "torch_trt_ref" in torch._dynamo.list_backends(exclude_tags=())
    from torch._dynamo.backends.registry import lookup_backend

    assert lookup_backend("torch_trt_ref") is dynamo_backend.torch_trt_ref_backend


def test_torch_executed_modules_through_torch_compile():
    """dynamo's record of each node's module reaches the partitioner: the listed submodule
    (by path) runs in PyTorch, with the reason in the graph's compile report."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()),
                                torch.nn.Linear(16, 4), torch.nn.ReLU()).eval()
    backend = dynamo_backend.Backend(min_block_size=1, torch_executed_modules=["2"])
    x = torch.randn(3, 8)
    with torch.no_grad():
        assert torch.allclose(torch.compile(model, backend=backend)(x), model(x), atol=1e-6)
    [graph] = backend.report.graphs
    reasons = graph.module.compile_report.support["reasons"]
    why = "inside torch_executed_modules module 2 (Sequential)"
    assert {op: r for op, r in reasons.items()} == {"aten.addmm.default": {why: 1},
                                                   "aten.gelu.default": {why: 1}}
    assert segments(graph) == (2, 1)
