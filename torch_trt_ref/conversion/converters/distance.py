"""Pairwise-distance converters: ``_cdist_forward`` (batched, broadcast) and
``_pdist_forward`` (condensed upper triangle), p-norms of row differences."""

from __future__ import annotations

import math
from typing import Optional

import torch

from .. import helpers
from .._trt_ops import EW, RED, UN
from ..registry import converter
from ._nn_common import float_only, meta, node_args

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


def _cdist_validator(node, settings) -> Optional[str]:
    reason = float_only(node, "cdist")
    if reason:
        return reason
    args = node_args(node)
    if {meta(args["x1"]).dtype, meta(args["x2"]).dtype} != {meta(args["x1"]).dtype}:
        return "cdist inputs of different dtypes"
    return _p_reason(args["p"])


@converter(aten._cdist_forward.default, validator=_cdist_validator, dynamic=True,
           family="distance")
def cdist(ctx, x1, x2, p, compute_mode=None):
    """out[..., i, j] = ||x1[..., i, :] - x2[..., j, :]||_p, evaluated directly (the
    matmul expansion torch may use for p = 2 trades accuracy for speed)."""
    a = helpers.unsqueeze(ctx, x1, -2)  # (..., P, 1, M)
    b = helpers.unsqueeze(ctx, x2, -3)  # (..., 1, R, M)
    diff = helpers.elementwise(ctx, EW.SUB, a, b, helpers.dtype_of(x1))
    return _p_norm(ctx, diff, p, -1)


def _pdist_validator(node, settings) -> Optional[str]:
    reason = float_only(node, "pdist")
    if reason:
        return reason
    n = meta(node.args[0]).shape[0]
    if not isinstance(n, int) or n < 2:
        return "pdist needs a static number of rows >= 2"
    return _p_reason(node_args(node)["p"])


@converter(aten._pdist_forward.default, validator=_pdist_validator, family="distance")
def pdist(ctx, input, p=2.0):
    """Distances of rows i < j in row-major order, gathered by constant index lists."""
    n = input.shape[0]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    rows = []
    for column in zip(*pairs):
        index = helpers.itensor(ctx, torch.tensor(column, dtype=torch.int32))
        rows.append(ctx.name_layer(ctx.net.add_gather(input, index, 0), "rows").get_output(0))
    diff = helpers.elementwise(ctx, EW.SUB, rows[0], rows[1], helpers.dtype_of(input))
    return _p_norm(ctx, diff, p, -1)
