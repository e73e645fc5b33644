"""The capability check: every rejected node carries its reason; the converter-support
report as text and as data."""

import operator

import pytest
import torch
from torch.fx import Graph, GraphModule

import torch_trt_ref as ttr
from torch_trt_ref import Input
from torch_trt_ref.capture import capture
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.conversion.registry import ConverterRegistry, converter
from torch_trt_ref.partitioning import (
    check_node,
    get_graph_converter_support,
    partition,
    support_report,
)

from .support import SeedOrder, lgamma_inputs, make_registry

aten = torch.ops.aten
SETTINGS = ttr.CompilationSettings(min_block_size=1)


@pytest.fixture(scope="module")
def seed_graph():
    return lower_program(capture(SeedOrder(), lgamma_inputs()), SETTINGS)


def _node(gm, target):
    return next(n for n in gm.graph.nodes if n.target == target)


def test_missing_converter_is_the_reason(seed_graph):
    reason = check_node(_node(seed_graph, aten.lgamma.default), SETTINGS, make_registry())
    assert reason == "no converter for aten.lgamma.default"


@pytest.mark.parametrize("spelling", [aten.add.Tensor, aten.add, "aten::add", "aten.add.Tensor"])
def test_torch_executed_ops_in_every_spelling(seed_graph, spelling):
    settings = SETTINGS.replace(torch_executed_ops={spelling})
    add = _node(seed_graph, aten.add.Tensor)
    assert check_node(add, settings, make_registry()) == "forced to PyTorch by torch_executed_ops"
    assert check_node(_node(seed_graph, aten.mul.Tensor), settings, make_registry()) is None


def test_validator_reason_is_reported(seed_graph):
    registry = ConverterRegistry()
    converter(aten.mul.Tensor, validator=lambda node, settings: "mul needs a constant",
              registry=registry)(lambda ctx, **kw: None)
    mul = _node(seed_graph, aten.mul.Tensor)
    assert check_node(mul, SETTINGS, registry) == "mul needs a constant"
    # A lower-priority converter that accepts the node makes it supported again.
    converter(aten.mul.Tensor, priority=-1, registry=registry)(lambda ctx, **kw: None)
    assert check_node(mul, SETTINGS, registry) is None


def test_symbolic_dims_need_a_dynamic_converter():
    class Scale(torch.nn.Module):
        def forward(self, x):
            return x * 2.0

    spec = Input(min_shape=(1, 4), opt_shape=(2, 4), max_shape=(8, 4))
    gm = lower_program(capture(Scale(), (spec,)), SETTINGS)
    node = _node(gm, aten.mul.Tensor)
    static_only = ConverterRegistry()
    converter(aten.mul.Tensor, dynamic=False, registry=static_only)(lambda ctx, **kw: None)
    assert "does not support dynamic shapes" in check_node(node, SETTINGS, static_only)
    assume = SETTINGS.replace(assume_dynamic_shape_support=True)
    assert check_node(node, assume, static_only) is None


def test_impure_ops_stay_in_pytorch():
    graph = Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.ones(2)
    node = graph.call_function(aten.add_.Tensor, (x, x))
    node.meta["val"] = torch.ones(2)
    graph.output(node)
    registry = ConverterRegistry()
    converter(aten.add_.Tensor, registry=registry)(lambda ctx, **kw: None)
    assert check_node(node, SETTINGS, registry) == "impure op (side effects)"
    GraphModule(torch.nn.Module(), graph)  # the graph is valid


def test_converter_support_counts_and_breakdown(seed_graph, capsys):
    supported, total = get_graph_converter_support(seed_graph, registry=make_registry())
    assert (supported, total) == (4, 7)
    printed = capsys.readouterr().out
    assert "4/7" in printed and "aten.lgamma.default: 3 -- no converter" in printed
    forced = get_graph_converter_support(seed_graph, torch_executed_ops={"aten::mul"},
                                         verbose=False, registry=make_registry())
    assert forced == (3, 7)


def test_support_report_as_data(seed_graph):
    data = support_report(seed_graph, SETTINGS, make_registry()).to_json()
    assert data["n_supported"] == 4 and data["n_total"] == 7
    assert data["supported"] == {"aten.add.Tensor": 1, "aten.mul.Tensor": 1,
                                 "aten.div.Tensor": 1, "aten.cat.default": 1}
    assert data["unsupported"] == {"aten.lgamma.default": 3}
    assert data["reasons"] == {"aten.lgamma.default": {"no converter for aten.lgamma.default": 3}}


def test_every_node_outside_tensorrt_has_a_reason():
    """Reasons: capability, a fusion group with an unsupported member, min_block_size."""
    class Mixed(torch.nn.Module):
        def forward(self, x):
            values, _ = torch.max(x + 1, dim=0)  # max.dim unsupported: its getitems follow
            return torch.relu(values), torch.lgamma(x) * 2

    x = torch.rand(3, 4) + 0.5
    gm = lower_program(capture(Mixed(), (x,)), SETTINGS)
    result = partition(gm, SETTINGS.replace(min_block_size=2), make_registry())
    outside = [n for s in result.segments if s.target != "tensorrt" for n in s.nodes]
    assert outside and all(n.name in result.rejected for n in outside)
    getitem = next(n for n in gm.graph.nodes if n.target is operator.getitem)
    assert "fusion group with aten.max.dim" in result.rejected[getitem.name]
    assert "min_block_size=2" in result.rejected[_node(gm, aten.relu.default).name]
