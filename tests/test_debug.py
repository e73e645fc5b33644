"""The divergence finder: an injected wrong converter is named as the first divergence (on a
real BERT), a correct model reports none, and reduce shrinks a failure to a runnable repro."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torch_trt_ref._trt import trt
from torch_trt_ref.conversion import helpers
from torch_trt_ref.conversion.registry import converter
from torch_trt_ref.debug import compare, reduce
from torch_trt_ref.debug.graphs import cast_graph

aten = torch.ops.aten
ROOT = Path(__file__).resolve().parents[1]


def wrong_gelu(ctx, input, approximate="none"):
    """A subtly wrong converter: the tanh approximation where erf GELU was asked for
    (max error ~3e-4; BERT's outputs still pass the rule, the gelu node does not)."""
    return helpers.activation(ctx, trt.ActivationType.GELU_TANH, input)


def biased_mul(ctx, input, other):
    """A wrong converter: x * y + 1e-3."""
    out = helpers.elementwise(ctx, trt.ElementWiseOperation.PROD, input, other)
    return helpers.elementwise(ctx, trt.ElementWiseOperation.SUM, out, 1e-3)


@pytest.fixture(scope="module")
def bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                        intermediate_size=128, vocab_size=500)
    return BertModel(config).eval(), torch.randint(0, 500, (1, 16))


def test_injected_converter_is_the_first_divergence_in_bert(bert, registry):
    model, ids = bert
    converter(aten.gelu.default, priority=100, dynamic=True, registry=registry)(wrong_gelu)
    report = compare(model, (ids,), registry=registry)
    first = report.first_divergence
    assert first is not None and first.op == "aten.gelu.default"
    assert first.node == "gelu"  # the first layer's gelu, not a later one
    assert first.converter == f"{__name__}:wrong_gelu" and first.runs_on == "tensorrt"
    assert first.segment.startswith("_run_on_tensorrt_")
    assert report.lowering is None and not report.passed
    assert "FIRST DIVERGENCE: node gelu" in report.render()
    assert report.to_json()["first_divergence"]["node"] == "gelu"


def test_correct_bert_reports_no_divergence(bert):
    model, ids = bert
    report = compare(model, (ids,))
    assert report.first_divergence is None, report.render()
    assert report.lowering is None and report.outputs.passed and report.passed
    compared = [r for r in report.nodes if r.within is not None]
    assert len(compared) > 60 and all(r.runs_on == "tensorrt" for r in compared)


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 16),
                               torch.nn.Tanh(), torch.nn.Linear(16, 4)).eval()


class _Gated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = _mlp()

    def forward(self, x):
        h = self.mlp[0](x)
        return self.mlp[2:](torch.sigmoid(h) * h)


def test_reduce_writes_a_small_failing_repro_that_runs(tmp_path, registry):
    converter(aten.mul.Tensor, priority=100, dynamic=True, registry=registry)(biased_mul)
    model, x = _Gated(), torch.randn(4, 8)
    reduced = reduce(model, (x,), out_dir=tmp_path, registry=registry, min_block_size=1)
    assert reduced.nodes == ["mul"], reduced.render()
    assert not reduced.verdict.passed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    run = subprocess.run([sys.executable, str(reduced.script)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILS: output 0" in run.stdout


def test_pytorch_segments_are_reported_as_run_in_pytorch():
    report = compare(_mlp(), (torch.randn(4, 8),), torch_executed_ops={"aten::gelu"},
                     min_block_size=1)
    where = {r.op: r.runs_on for r in report.nodes}
    assert where["aten.gelu.default"] == "pytorch" and where["aten.addmm.default"] == "tensorrt"
    assert report.passed, report.render()


def test_fp16_compare_maps_nodes_through_the_precision_casts():
    report = compare(_mlp(), (torch.randn(4, 8),), precision="fp16", min_block_size=1)
    assert report.first_divergence is None, report.render()
    assert any(r.op == "aten.gelu.default" and r.dtype == "float16" and r.within
               for r in report.nodes)


def test_float64_copy_rewrites_explicit_float_dtypes():
    def f(x):
        y = aten._to_copy.default(x, dtype=torch.float16)
        return aten.add.Tensor(y, aten.full.default([2], 0.5, dtype=torch.float32))

    gm = torch.fx.symbolic_trace(f)
    out = cast_graph(gm)(torch.ones(2, dtype=torch.float64) / 3)
    assert out.dtype == torch.float64 and torch.allclose(out, torch.full((2,), 1 / 3 + 0.5,
                                                                         dtype=torch.float64))


def test_suffix_bisection_and_ddmin_find_the_needed_nodes():
    from torch_trt_ref.debug.reduce import _ddmin, _shortest_suffix

    def f(x):
        a = aten.relu.default(x)
        b = aten.neg.default(a)
        c = aten.exp.default(b)
        d = aten.abs.default(c)
        return aten.add.Tensor(d, b)

    nodes = [n for n in torch.fx.symbolic_trace(f).graph.nodes if n.op == "call_function"]

    class Tester:  # "fails" when the subgraph holds neg and add (and abs, with the suffix)
        count = 0

        def fails(self, keep):
            self.count += 1
            return {"neg", "add"} <= {n.name.split("_")[0] for n in keep}

    tester = Tester()
    suffix = _shortest_suffix(nodes, tester)
    assert [n.target for n in suffix] == [n.target for n in nodes[1:]]  # relu is not needed
    assert [n.target for n in _ddmin(suffix, nodes[-1], tester)] == [nodes[1].target,
                                                                     nodes[-1].target]
