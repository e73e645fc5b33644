"""Pairwise-distance converters: ``_cdist_forward`` (batched, broadcast) and
``_pdist_forward`` (condensed upper triangle), p-norms of row differences."""

from __future__ import annotations

import math
from typing import Optional

import torch

from .. import dims as D
from .. import helpers
from .._trt_ops import EW, RED, UN
from ..blocks.nodes import fake, fake_input, float_only, node_args
from ..blocks.shape import index_vector
from ..registry import converter

aten = torch.ops.aten


def _p_norm(ctx, diff, p: float, axis: int):
    """||diff||_p over ``axis``: p = 0 counts non-zeros, p = inf takes the max."""
    dtype = helpers.dtype_of(diff)
    mask = 1 << helpers.normalize_dim(axis, len(diff.shape))

    def reduce(value, op):
        return ctx.name_layer(ctx.net.add_reduce(value, op, mask, False), "p_norm").get_output(0)

    absolute = helpers.unary(ctx, UN.ABS, diff)
    if p == 0:
        zero = helpers.elementwise(ctx, EW.EQUAL, absolute, 0.0, dtype)
        nonzero = helpers.cast(ctx, helpers.unary(ctx, UN.NOT, zero), dtype)
        return reduce(nonzero, RED.SUM)
    if math.isinf(p):
        return reduce(absolute, RED.MAX)
    if p == 1:
        return reduce(absolute, RED.SUM)
    if p == 2:
        return helpers.unary(ctx, UN.SQRT, reduce(
            helpers.elementwise(ctx, EW.PROD, absolute, absolute, dtype), RED.SUM))
    powered = helpers.elementwise(ctx, EW.POW, absolute, float(p), dtype)
    return helpers.elementwise(ctx, EW.POW, reduce(powered, RED.SUM), 1.0 / p, dtype)


def _p_reason(p) -> Optional[str]:
    return None if p >= 0 else f"p = {p} is not a norm"


def _cdist_ok(node, settings) -> Optional[str]:
    reason = float_only(node, "cdist")
    if reason:
        return reason
    args = node_args(node)
    if {fake(args["x1"]).dtype, fake(args["x2"]).dtype} != {fake(args["x1"]).dtype}:
        return "cdist inputs of different dtypes"
    return _p_reason(args["p"])


@converter(aten._cdist_forward.default, validator=_cdist_ok, dynamic=True,
           family="distance")
def cdist(ctx, x1, x2, p, compute_mode=None):
    """out[..., i, j] = ||x1[..., i, :] - x2[..., j, :]||_p, evaluated directly (the
    matmul expansion torch may use for p = 2 trades accuracy for speed)."""
    x1, x2 = helpers.itensor(ctx, x1), helpers.itensor(ctx, x2)  # either may be a constant
    a = helpers.unsqueeze(ctx, x1, -2)  # (..., P, 1, M)
    b = helpers.unsqueeze(ctx, x2, -3)  # (..., 1, R, M)
    diff = helpers.elementwise(ctx, EW.SUB, a, b, helpers.dtype_of(x1))
    return _p_norm(ctx, diff, p, -1)


def _pdist_ok(node, settings) -> Optional[str]:
    reason = float_only(node, "pdist")
    if reason:
        return reason
    n = fake_input(node).shape[0]
    if isinstance(n, int) and n < 2:
        return "pdist needs at least 2 rows"
    return _p_reason(node_args(node)["p"])


def _pairs_static(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    return tuple(torch.tensor(column, dtype=torch.int64) for column in zip(*pairs))


def _pairs_dynamic(ctx, n):
    """Row indices (i, j) of the pairs i < j in row-major order for a runtime ``n``. Row i
    starts at offset(i) = i (2n - i - 1) / 2 of the condensed output, so pair k has
    i = #{r > 0 : offset(r) <= k} and j = k - offset(i) + i + 1 (exact integer math)."""
    count = D.dim_op(ctx, "floordiv", D.dim_op(ctx, "mul", n, D.dim_op(ctx, "sub", n, 1)), 2)
    k = index_vector(ctx, count)
    r = index_vector(ctx, n)
    twice = helpers.elementwise(ctx, EW.PROD, r, helpers.elementwise(
        ctx, EW.SUB, helpers.elementwise(ctx, EW.SUB, D.dim_op(ctx, "mul", n, 2), r), 1,
        torch.int64))
    offset = helpers.elementwise(ctx, EW.FLOOR_DIV, twice, 2, torch.int64)
    later = helpers.elementwise(ctx, EW.GREATER, helpers.unsqueeze(ctx, offset, 0),
                                helpers.unsqueeze(ctx, k, 1), torch.int64)  # (count, n)
    started = helpers.cast(ctx, helpers.unary(ctx, UN.NOT, later), torch.int32)
    reduce = ctx.net.add_reduce(started, RED.SUM, 1 << 1, False)
    i = helpers.cast(ctx, ctx.name_layer(reduce, "pair_row").get_output(0), torch.int64)
    i = helpers.elementwise(ctx, EW.SUB, i, 1, torch.int64)
    row_offset = ctx.name_layer(ctx.net.add_gather(offset, i, 0), "row_offset").get_output(0)
    j = helpers.elementwise(ctx, EW.SUB, k, row_offset, torch.int64)
    j = helpers.elementwise(ctx, EW.SUM, j, helpers.elementwise(ctx, EW.SUM, i, 1,
                                                                torch.int64), torch.int64)
    return i, j


@converter(aten._pdist_forward.default, validator=_pdist_ok, dynamic=True,
           family="distance")
def pdist(ctx, input, p=2.0):
    """Distances of rows i < j in row-major order: pair indices are constants for a static
    number of rows, computed from the runtime size otherwise."""
    n = helpers.dim_size(ctx, input, 0)
    pairs = _pairs_static(n) if isinstance(n, int) else _pairs_dynamic(ctx, n)
    rows = []
    for index in pairs:
        gather = ctx.net.add_gather(input, helpers.itensor(ctx, index), 0)
        rows.append(ctx.name_layer(gather, "rows").get_output(0))
    diff = helpers.elementwise(ctx, EW.SUB, rows[0], rows[1], helpers.dtype_of(input))
    return _p_norm(ctx, diff, p, -1)
