"""Knobs every strategy honours: min_block_size (compute nodes only), torch_executed_ops,
require_full_compilation; and the strategy choice through compile(partitioner=...)."""

import pytest
import torch

import torch_trt_ref as ttr
from torch_trt_ref import Input
from torch_trt_ref.capture import capture
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.partitioning import UnsupportedOperatorError, partition
from torch_trt_ref.partitioning.capability import is_compute_node

from .graphs import build
from .support import STRATEGY_NAMES, SeedOrder, lgamma_inputs, make_registry, plan

aten = torch.ops.aten
REGISTRY = make_registry()
SETTINGS = ttr.CompilationSettings(min_block_size=1)


@pytest.fixture(scope="module")
def seed_graph():
    return lower_program(capture(SeedOrder(), lgamma_inputs()), SETTINGS)


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_min_block_size_counts_compute_nodes_not_getitems(strategy):
    # split -> getitem, getitem -> add: four nodes, two of which compute.
    gm, _ = build([("split", (0, 0), 1), ("add", (2, 3), 1)])
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert [is_compute_node(n) for n in calls] == [True, False, False, True]
    two = partition(gm, SETTINGS.replace(min_block_size=2, partitioner=strategy), REGISTRY)
    assert [s.target for s in two.segments] == ["tensorrt"]
    three = partition(gm, SETTINGS.replace(min_block_size=3, partitioner=strategy), REGISTRY)
    assert [s.target for s in three.segments] == ["torch"]


def test_shape_bookkeeping_does_not_count():
    class Flatten(torch.nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0], -1) + 1

    spec = Input(min_shape=(1, 2, 3), opt_shape=(2, 2, 3), max_shape=(4, 2, 3))
    gm = lower_program(capture(Flatten(), (spec,)), SETTINGS)
    sym = [n for n in gm.graph.nodes if n.target == aten.sym_size.int]
    assert sym and not any(is_compute_node(n) for n in sym)


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("spelling", [aten.div.Tensor, aten.div, "aten::div"])
def test_torch_executed_ops_stay_in_pytorch(seed_graph, strategy, spelling):
    settings = SETTINGS.replace(partitioner=strategy, torch_executed_ops={spelling})
    result = partition(seed_graph, settings, REGISTRY)
    assert all(n.target != aten.div.Tensor for s in result.segments
               if s.target == "tensorrt" for n in s.nodes)
    if strategy == "dependency_aware":  # derived by hand from seed 000's algorithm
        assert plan(result) == [("torch", ["div", "lgamma", "lgamma", "lgamma"]),
                                ("tensorrt", ["add", "cat", "mul"])]


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_require_full_compilation_lists_unsupported_ops_with_counts(seed_graph, strategy):
    settings = SETTINGS.replace(partitioner=strategy, require_full_compilation=True)
    with pytest.raises(UnsupportedOperatorError) as err:
        partition(seed_graph, settings, REGISTRY)
    assert "aten.lgamma.default: 3 nodes -- no converter for aten.lgamma.default" in str(err.value)


class Supported(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x + y, x * y, x / y])


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_full_compilation_exempts_a_supported_graph_from_min_block_size(strategy):
    gm = lower_program(capture(Supported(), lgamma_inputs()), SETTINGS)
    big = SETTINGS.replace(partitioner=strategy, min_block_size=50)
    assert [s.target for s in partition(gm, big, REGISTRY).segments] == ["torch"]
    full = big.replace(require_full_compilation=True)
    assert [s.target for s in partition(gm, full, REGISTRY).segments] == ["tensorrt"]


def test_full_compilation_through_compile():
    x, y = lgamma_inputs()
    compiled = ttr.compile(Supported(), (x, y), registry=REGISTRY, min_block_size=50,
                           require_full_compilation=True, partitioner="dependency_aware")
    assert compiled.compile_report.counts == {"tensorrt": 1}
    torch.testing.assert_close(compiled(x, y), Supported()(x, y))
    with pytest.raises(UnsupportedOperatorError, match="aten.lgamma.default: 3 nodes"):
        ttr.compile(SeedOrder(), (x, y), registry=REGISTRY, require_full_compilation=True)
