"""Shared helpers for the partitioning tests: a fresh converter registry with the few test
converters they need, the seed 000 lgamma models, and invariant checks on a plan."""

from __future__ import annotations

import torch
from torch.fx import GraphModule

from torch_trt_ref.conversion import helpers
from torch_trt_ref.conversion._trt_ops import EW
from torch_trt_ref.conversion.registry import (
    CONVERTERS,
    USER_PRIORITY,
    ConverterRegistry,
    converter,
)
from torch_trt_ref.partitioning import TENSORRT, PartitionResult
from torch_trt_ref.partitioning.capability import is_compute_node
from torch_trt_ref.settings import matches_op
from zoo.models.synthetic import LgammaGraph

aten = torch.ops.aten
STRATEGY_NAMES = ("fast", "global", "dependency_aware", "hierarchical")


# Ops the tests treat as having no converter, whatever converters other modules register.
UNCONVERTED = (aten.lgamma.default, aten.erf.default, aten.atan2.default, aten.max.dim)


def make_registry() -> ConverterRegistry:
    """CONVERTERS plus test converters for mul, div, sub, cat and split (registered with
    user priority so converters added elsewhere later do not change these tests), minus
    any converter for the ``UNCONVERTED`` ops."""
    reg = CONVERTERS.copy()
    for target in UNCONVERTED:
        reg.entries.pop(target, None)

    def binary(target, op):
        @converter(target, dynamic=True, priority=USER_PRIORITY, registry=reg)
        def convert(ctx, input, other, alpha=1):
            if alpha != 1:
                other = helpers.elementwise(ctx, EW.PROD, other, alpha, ctx.out_dtype)
            return helpers.elementwise(ctx, op, input, other, ctx.out_dtype)

    binary(aten.mul.Tensor, EW.PROD)
    binary(aten.div.Tensor, EW.DIV)
    binary(aten.sub.Tensor, EW.SUB)

    @converter(aten.cat.default, priority=USER_PRIORITY, registry=reg)
    def cat(ctx, tensors, dim=0):
        tensors = [helpers.itensor(ctx, t, ctx.out_dtype) for t in tensors]
        layer = ctx.net.add_concatenation(tensors)
        layer.axis = helpers.normalize_dim(dim, len(tensors[0].shape))
        return layer.get_output(0)

    def slices(ctx, input, sizes, dim):
        shape = list(input.shape)
        dim = helpers.normalize_dim(dim, len(shape))
        outs, start = [], 0
        for size in sizes:
            begin, extent = [0] * len(shape), list(shape)
            begin[dim], extent[dim] = start, size
            outs.append(ctx.net.add_slice(input, begin, extent, [1] * len(shape)).get_output(0))
            start += size
        return outs

    @converter(aten.split.Tensor, priority=USER_PRIORITY, registry=reg)
    def split(ctx, input, split_size, dim=0):
        n = input.shape[dim]
        return slices(ctx, input, [min(split_size, n - s) for s in range(0, n, split_size)], dim)

    @converter(aten.split_with_sizes.default, priority=USER_PRIORITY, registry=reg)
    def split_with_sizes(ctx, input, split_sizes, dim=0):
        return slices(ctx, input, split_sizes, dim)

    return reg


# Seed 000's graph, ops written in the seed's order (add, lgamma, mul, lgamma, div, lgamma,
# cat) so the exported graph has that node order; the zoo entry "lgamma_graph" is the same.
SeedOrder = LgammaGraph


class CatExpression(torch.nn.Module):
    """The same computation as one expression; torch.export orders it lgamma(x), lgamma(y),
    div, lgamma(div), add, mul, cat."""

    def forward(self, x, y):
        return torch.cat([torch.lgamma(x), torch.lgamma(y), torch.lgamma(x / y), x + y, x * y])


def lgamma_inputs():
    torch.manual_seed(0)
    return torch.rand(2, 3) + 0.5, torch.rand(2, 3) + 0.5


def plan(result: PartitionResult) -> list[tuple[str, list[str]]]:
    """(target, sorted op names) per segment, the form golden tests pin."""
    out = []
    for seg in result.segments:
        ops = sorted(str(n.target).replace("aten.", "").split(".")[0] for n in seg.nodes
                     if is_compute_node(n))
        out.append((seg.target, ops))
    return out


def check_invariants(gm: GraphModule, result: PartitionResult, settings) -> None:
    """(b) TensorRT segments pass only tensors; (c) the segment order is a valid execution
    order and every call_function node is in exactly one segment; (d) min_block_size and
    torch_executed_ops hold."""
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    owner = {}
    for i, seg in enumerate(result.segments):
        for n in seg.nodes:
            assert n not in owner, f"{n} in two segments"
            owner[n] = i
    assert set(owner) == set(calls), "some call_function node is in no segment"
    for i, seg in enumerate(result.segments):
        for pos, n in enumerate(seg.nodes):
            for a in n.all_input_nodes:
                if a in owner:
                    assert owner[a] <= i, f"{n.name} (segment {i}) reads {a.name} from a later " \
                                          f"segment {owner[a]}"
                    if owner[a] == i:
                        assert seg.nodes.index(a) < pos, f"{a.name} after its user {n.name}"
        if seg.target != TENSORRT:
            continue
        for v in list(seg.inputs) + list(seg.outputs):
            assert isinstance(v.meta.get("val"), torch.Tensor), \
                f"TensorRT segment {i} passes non-tensor {v.name}"
        for n in seg.nodes:
            assert not matches_op(n.target, settings.torch_executed_ops), \
                f"{n.name} is in torch_executed_ops but runs in TensorRT"
        if not settings.enable_resource_partitioning:
            size = sum(1 for n in seg.nodes if is_compute_node(n))
            assert size >= settings.min_block_size, f"segment {i} has {size} compute nodes"
