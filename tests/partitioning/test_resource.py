"""Resource partitioning (seed 002): TensorRT segments are split to fit the per-engine budget,
atomic subgraphs are never split, a fusion at a cut moves whole to the side holding most
of it, oversized groups are reported; custom atomic patterns."""

import pytest
import torch

import torch_trt_ref as ttr
from torch_trt_ref.capture import capture
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.partitioning import TENSORRT, Segment, partition, register_atomic_subgraph
from torch_trt_ref.partitioning import atomic as atomic_module
from torch_trt_ref.partitioning.atomic import find_atomic_groups
from torch_trt_ref.partitioning.driver import unit_graph
from torch_trt_ref.partitioning.resource import resource_partition

from .graphs import build
from .support import make_registry

aten = torch.ops.aten
REGISTRY = make_registry()
SETTINGS = ttr.CompilationSettings(min_block_size=1)
BLOCK_BYTES = (8 * 8 * 3 * 3 + 8) * 4 + 4 * 8 * 4  # conv weight + bias, 4 batch-norm vectors
SILU_BYTES = (8 * 8 + 8) * 4  # 1x1 conv weight + bias


def _block():
    return [torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU()]


def conv_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(*_block(), *_block(), torch.nn.Conv2d(8, 8, 1), torch.nn.SiLU(),
                               *_block()).eval()


INPUT = torch.randn(1, 8, 6, 6)


@pytest.fixture(scope="module")
def conv_graph():
    return lower_program(capture(conv_model(), (INPUT,)), SETTINGS)


def _resource(budget):
    return SETTINGS.replace(enable_resource_partitioning=True, cpu_memory_budget=4 * budget)


def test_builtin_patterns_find_conv_bn_relu_and_decomposed_silu(conv_graph):
    groups = find_atomic_groups(conv_graph)
    names = sorted(name for name, _ in groups)
    assert names == ["ConvBatchNormActivation(aten.relu.default)"] * 3 + ["ConvSiLUDecomposed"]
    assert all(len(nodes) == 4 for name, nodes in groups if name.startswith("ConvBatch"))


def test_segment_is_split_under_budget_without_cutting_a_group(conv_graph):
    assert BLOCK_BYTES == 2464 and SILU_BYTES == 288
    result = partition(conv_graph, _resource(6000), REGISTRY)
    sizes = [s.weight_bytes for s in result.segments]
    # 3 * 2464 + 288 = 7680 > 6000: two pieces aimed at 3840 each; block 1 crosses the half
    # at its first node, so it opens the second piece.
    assert sizes == [BLOCK_BYTES, 2 * BLOCK_BYTES + SILU_BYTES] and not result.notes
    owner = {n: i for i, s in enumerate(result.segments) for n in s.nodes}
    for _, nodes in find_atomic_groups(conv_graph):
        assert len({owner[n] for n in nodes}) == 1


def test_a_group_over_the_budget_stays_whole_and_is_reported(conv_graph):
    result = partition(conv_graph, _resource(2000), REGISTRY)
    assert [s.weight_bytes for s in result.segments] == [BLOCK_BYTES] * 2 + [SILU_BYTES,
                                                                             BLOCK_BYTES]
    assert len(result.notes) == 3 and all("over the per-engine budget of 2000" in note
                                          for note in result.notes)
    assert "note: atomic group [convolution," in str(result)
    assert result.to_json()["notes"] == result.notes


def test_resource_partitioned_module_equals_eager():
    model = conv_model()
    compiled = ttr.compile(model, (INPUT,), registry=REGISTRY, min_block_size=1,
                           enable_resource_partitioning=True, cpu_memory_budget=4 * 6000,
                           partitioner="dependency_aware")
    assert compiled.compile_report.counts == {"tensorrt": 2}
    assert not compiled.compile_report.fallbacks
    torch.testing.assert_close(compiled(INPUT), model(INPUT), rtol=1e-4, atol=1e-4)


def _split_with_group(ops, group_values, budget=32):
    """Resource-split one TensorRT segment of the graph ``ops`` with an explicit atomic
    group (indices into the graph's values) and return the pieces' node names."""
    gm, _ = build(ops)
    values = [n for n in gm.graph.nodes if n.op in ("placeholder", "call_function")]
    group = [values[i] for i in group_values]
    units = unit_graph(gm, SETTINGS, {}, atomic=[group] if group else [])
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    notes = []
    pieces = resource_partition(gm, [Segment(TENSORRT, calls)], units, budget, notes)
    return [[n.name for n in p.nodes] for p in pieces], notes


# v2 = x0 * w (16 B); v3, v4, v5: a three-node group; v6 = x1 * w (16 B). Budget 32 B of
# 48 B: two pieces, the cut aimed at 24 B.
def test_group_moves_to_the_side_holding_most_of_it():
    # group relu -> relu -> mul(w): the 24 B mark is passed at its third node (2 of 3 left)
    ops = [("weight", (0, 0), 1), ("relu", (1, 0), 1), ("relu", (3, 0), 1),
           ("weight", (4, 0), 1), ("weight", (1, 0), 1)]
    pieces, notes = _split_with_group(ops, [3, 4, 5])
    assert pieces == [["mul_tensor", "relu_default", "relu_default_1", "mul_tensor_1"],
                      ["mul_tensor_2"]] and not notes
    # group relu -> mul(w) -> relu: passed at its second node (1 of 3 left): moves right
    ops = [("weight", (0, 0), 1), ("relu", (1, 0), 1), ("weight", (3, 0), 1),
           ("relu", (4, 0), 1), ("weight", (1, 0), 1)]
    pieces, _ = _split_with_group(ops, [3, 4, 5])
    assert pieces == [["mul_tensor"], ["relu_default", "mul_tensor_1", "relu_default_1",
                                       "mul_tensor_2"]]


@pytest.fixture
def relu_mul_pattern():
    @register_atomic_subgraph(init_args=(aten.relu.default,))
    class ActivationThenScale(torch.nn.Module):
        def __init__(self, activation):
            super().__init__()
            self.activation = activation

        def forward(self, x, w):
            return aten.mul.Tensor(self.activation(x), w)

    yield "ActivationThenScale(aten.relu.default)"
    atomic_module.ATOMIC_PATTERNS[:] = [p for p in atomic_module.ATOMIC_PATTERNS
                                        if not p.name.startswith("ActivationThenScale")]


def test_custom_pattern_keeps_its_nodes_together(relu_mul_pattern):
    # v2 = x0 * w (16 B); v3 = relu(x1); v4 = v3 * w (16 B); v5 = x0 * w (16 B)
    gm, _ = build([("weight", (0, 0), 1), ("relu", (1, 0), 1), ("weight", (3, 0), 1),
                   ("weight", (0, 0), 1)])
    assert [name for name, _ in find_atomic_groups(gm)] == [relu_mul_pattern]
    result = partition(gm, _resource(32), REGISTRY)
    # relu -> mul is cut at the mul (its weight passes 24 B); the group moves right whole
    assert [[n.name for n in s.nodes] for s in result.segments] == [
        ["mul_tensor"], ["relu_default", "mul_tensor_1", "mul_tensor_2"]]


def test_without_the_custom_pattern_the_cut_separates_relu_and_mul():
    gm, _ = build([("weight", (0, 0), 1), ("relu", (1, 0), 1), ("weight", (3, 0), 1),
                   ("weight", (0, 0), 1)])
    result = partition(gm, _resource(32), REGISTRY)
    assert [[n.name for n in s.nodes] for s in result.segments] == [
        ["mul_tensor", "relu_default"], ["mul_tensor_1", "mul_tensor_2"]]


def test_patterns_must_be_written_in_aten():
    with pytest.raises(NotImplementedError, match="ATen"):
        register_atomic_subgraph(is_core_aten=False)(torch.nn.ReLU)
