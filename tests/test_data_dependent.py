"""Capability honesty: data-dependent sizes (unbacked symbols) are planned for PyTorch with
a reason, unless a converter declares it handles them; enabled_decompositions applies and
leaves torch's tables alone."""

import warnings

import pytest
import torch
from torch._decomp import get_decompositions

import torch_trt_ref as ttr
from torch_trt_ref.capture import capture
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.conversion.registry import converter
from torch_trt_ref.partitioning import check_node

aten = torch.ops.aten


class AfterNonzero(torch.nn.Module):
    """Supported elementwise ops on nonzero's output, whose row count u0 is data-dependent,
    beside a static branch TensorRT can take."""

    def forward(self, x):
        rows = torch.nonzero(x > 0).float()
        y = torch.relu(rows * 2.0 + 1.0) - 3.0
        return (y * y).sum(1) + 1.0, torch.exp(x) * 2.0 + 1.0


@pytest.fixture(scope="module")
def lowered():
    x = torch.randn(4, 5)
    return lower_program(capture(AfterNonzero(), (x,)), ttr.CompilationSettings()), x


def test_nodes_after_nonzero_run_in_pytorch_with_a_reason():
    model, x = AfterNonzero().eval(), torch.randn(4, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no failed build, no fallback warning
        compiled = ttr.compile(model, (x,), min_block_size=1)
    report = compiled.compile_report
    assert report.fallbacks == {}
    reasons = report.support["reasons"]
    for op in ("aten.mul.Tensor", "aten.relu.default", "aten.sum.dim_IntList"):
        (reason,) = [r for r in reasons[op] if "unbacked" in r]
        assert "depend on data (unbacked u0, made by nonzero" in reason
        assert "does not declare unbacked=True" in reason
    # the static branch still goes to TensorRT, and the whole module equals eager
    assert report.counts["tensorrt"] == 1 and len(report.engines) == 1
    for got, want in zip(compiled(x), model(x)):
        torch.testing.assert_close(got, want)


def test_a_converter_declaring_unbacked_takes_the_node(lowered, registry):
    gm, _ = lowered
    relu = next(n for n in gm.graph.nodes if n.target is aten.relu.default)
    settings = ttr.CompilationSettings()
    assert "unbacked u0" in check_node(relu, settings, registry)
    converter(aten.relu.default, dynamic=True, unbacked=True, priority=100,
              registry=registry)(lambda ctx, self: self)
    assert check_node(relu, settings, registry) is None
    exp = next(n for n in gm.graph.nodes if n.target is aten.exp.default)
    assert check_node(exp, settings, registry) is None  # static: untouched by the rule


def test_enabled_decompositions_applies_and_leaves_torch_tables_alone():
    before = get_decompositions([aten.native_layer_norm])
    assert before  # torch has one
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8)).eval()
    x = torch.randn(2, 8)
    settings = ttr.CompilationSettings(enabled_decompositions={"aten.native_layer_norm"})
    gm = lower_program(capture(model, (x,)), settings)
    ops = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert aten.native_layer_norm.default not in ops  # decomposed (kept whole by default)
    kept = lower_program(capture(model, (x,)), ttr.CompilationSettings())
    assert aten.native_layer_norm.default in {n.target for n in kept.graph.nodes}
    after = get_decompositions([aten.native_layer_norm])
    assert set(after) == set(before) and all(after[k] is before[k] for k in before)
    compiled = ttr.compile(model, (x,), settings=settings.replace(min_block_size=1))
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
