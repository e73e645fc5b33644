"""embedding_bag (sum / mean / max bags of embedding rows): a gather of the rows, then a
segment reduction over a [bags, indices] membership mask built from the offsets."""

from __future__ import annotations

import operator

import torch
from torch.fx import Node

from .. import dims as D
from .. import helpers
from .._trt_ops import EW, RED, UN
from ..blocks.index import gather
from ..blocks.linalg import MAT
from ..blocks.nodes import FLOAT_DTYPES, fake, node_args
from ..blocks.reduce import arange, reduce, where
from ..registry import converter

aten = torch.ops.aten
SUM, MEAN, MAX = 0, 1, 2
TARGETS = (aten._embedding_bag.default, aten._embedding_bag_forward_only.default,
           aten.embedding_bag.default, aten.embedding_bag.padding_idx)


def _bag_ok(node: Node, settings) -> str | None:
    for user in node.users:
        if user.target is not operator.getitem or user.args[1] != 0:
            return "embedding_bag's offset2bag, bag_size and max_indices outputs are not " \
                   "produced (only the bags)"
    args = node_args(node)
    weight = fake(args["weight"])
    if weight.dtype not in FLOAT_DTYPES:
        return f"embedding_bag of {weight.dtype} weights is not supported"
    if fake(args["indices"]).dim() != 1:
        return "embedding_bag takes 1-D indices with offsets"
    return None


def bag_membership(ctx, indices, offsets, n: D.Dim, bags: D.Dim, padding_idx):
    """A [bags, n] bool mask: index j belongs to bag b when b is the last offset <= j
    (empty bags repeat an offset), and it is not ``padding_idx``."""
    position = D.reshape(ctx, arange(ctx, n), [1, n])
    starts = D.reshape(ctx, offsets, [-1, 1])
    started = helpers.unary(ctx, UN.NOT, helpers.elementwise(ctx, EW.LESS, position, starts))
    count = reduce(ctx, RED.SUM, helpers.cast(ctx, started, torch.int32), [0], True)
    bag = helpers.elementwise(ctx, EW.SUB, helpers.cast(ctx, count, torch.int64), 1)
    member = helpers.elementwise(ctx, EW.EQUAL, bag, D.reshape(ctx, arange(ctx, bags),
                                                               [bags, 1]))
    if padding_idx is not None and padding_idx >= 0:
        padding = helpers.elementwise(ctx, EW.EQUAL, D.reshape(ctx, indices, [1, n]),
                                      padding_idx)
        member = helpers.elementwise(ctx, EW.AND, member, helpers.unary(ctx, UN.NOT, padding))
    return member


@converter(*TARGETS, validator=_bag_ok, dynamic=True)
def embedding_bag(ctx, weight, indices, offsets, scale_grad_by_freq=False, mode=SUM,
                  sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=-1):
    """Bags b = [offsets[b], offsets[b + 1]) of ``indices`` (the last ends at the end of
    ``indices`` unless ``include_last_offset``, where offsets has one entry more than
    there are bags). sum is a matrix product of the mask with the rows (times
    ``per_sample_weights``), mean divides by the bag's size, max masks with -inf; an empty
    bag gives zeros, as in torch."""
    dtype = ctx.out_dtype if not isinstance(ctx.out_meta, tuple) else ctx.out_meta[0].dtype
    weight = helpers.itensor(ctx, weight, dtype)
    indices = helpers.itensor(ctx, indices, torch.int64)
    offsets = helpers.itensor(ctx, offsets, torch.int64)
    n = D.dims_of(ctx, indices)[0]
    bags = D.dims_of(ctx, offsets)[0]
    if include_last_offset:
        bags = D.dim_op(ctx, "sub", bags, 1)
    rows = gather(ctx, weight, indices, 0)  # [n, embedding_dim]
    member = bag_membership(ctx, indices, offsets, n, bags, padding_idx)
    size = reduce(ctx, RED.SUM, helpers.cast(ctx, member, torch.int32), [1], True)
    if mode == MAX:
        masked = where(ctx, D.reshape(ctx, member, [bags, n, 1]),
                        D.reshape(ctx, rows, [1, n, -1]), float("-inf"))
        out = reduce(ctx, RED.MAX, helpers.cast(ctx, masked, dtype), [1], False)
        out = where(ctx, helpers.elementwise(ctx, EW.GREATER, size, 0), out, 0.0)
        return helpers.cast(ctx, out, dtype), None, None, None
    scale = helpers.cast(ctx, member, dtype)
    if per_sample_weights is not None:
        scale = helpers.elementwise(ctx, EW.PROD, scale, D.reshape(
            ctx, helpers.itensor(ctx, per_sample_weights, dtype), [1, n]), dtype)
    layer = ctx.net.add_matrix_multiply(scale, MAT.NONE, rows, MAT.NONE)
    out = ctx.name_layer(layer, "bag_sum").get_output(0)
    if mode == MEAN:
        divisor = helpers.elementwise(ctx, EW.MAX, helpers.cast(ctx, size, dtype), 1.0, dtype)
        out = helpers.elementwise(ctx, EW.DIV, out, divisor, dtype)
    return out, None, None, None
