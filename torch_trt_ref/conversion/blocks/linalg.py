"""Matrix building blocks: ``MAT`` (TensorRT's MatrixOperation), ``matmul``, ``mask_future``
(the causal mask) and ``attention`` (softmax(q k^T * scale + bias) v with its log-sum-exp,
as torch's fused kernels compute it), shared by the attention kernels, the composite
scaled_dot_product_attention and quantized attention."""

from __future__ import annotations

import math

from ..._trt import trt
from .. import helpers
from .._trt_ops import EW, RED, UN
from .elementwise import opmath
from .reduce import positions, reduce, where

MAT = trt.MatrixOperation


def matmul(ctx, a, b, transpose_b: bool = False):
    """a @ b (a @ bᵀ with ``transpose_b``) of two network tensors."""
    layer = ctx.net.add_matrix_multiply(a, MAT.NONE, b,
                                        MAT.TRANSPOSE if transpose_b else MAT.NONE)
    return ctx.name_layer(layer, "matmul").get_output(0)


def mask_future(ctx, scores):
    """``scores`` [..., L, S] with key j > query i set to -inf (causal attention, top-left
    aligned as torch)."""
    rank = len(scores.shape)
    row, col = positions(ctx, scores, rank - 2), positions(ctx, scores, rank - 1)
    return where(ctx, helpers.elementwise(ctx, EW.GREATER, col, row), float("-inf"), scores)


def attention(ctx, query, key, value, bias, is_causal: bool, scale):
    """(softmax(q k^T * scale + bias) v, logsumexp over the keys), computed in float32
    for half inputs (as torch's kernels accumulate); is_causal masks key j > query i
    (top-left aligned, as torch)."""
    dtype = helpers.dtype_of(query)
    compute = opmath(dtype)
    q, k, v = (helpers.cast(ctx, t, compute) for t in (query, key, value))
    scale = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = helpers.elementwise(ctx, EW.PROD, matmul(ctx, q, k, True), scale, compute)
    if bias is not None:
        scores = helpers.elementwise(ctx, EW.SUM, scores, helpers.itensor(ctx, bias, compute),
                                     compute)
    if is_causal:
        scores = mask_future(ctx, scores)
    last = len(scores.shape) - 1
    peak = reduce(ctx, RED.MAX, scores, [last], True)
    # Note [Fully masked rows]: a query that may attend to no key has peak -inf; torch
    # returns zeros there (and a log-sum-exp of -inf), not the NaN of 0 / 0.
    masked_row = helpers.elementwise(ctx, EW.EQUAL, peak, float("-inf"), compute)
    peak = where(ctx, masked_row, 0.0, peak)
    weights = helpers.unary(ctx, UN.EXP, helpers.elementwise(ctx, EW.SUB, scores, peak))
    total = reduce(ctx, RED.SUM, weights, [last], True)
    out = matmul(ctx, helpers.elementwise(ctx, EW.DIV, weights, total), v)
    out = where(ctx, masked_row, 0.0, out)
    logsumexp = helpers.elementwise(ctx, EW.SUM, helpers.unary(ctx, UN.LOG, total), peak)
    return helpers.cast(ctx, out, dtype), logsumexp  # logsumexp: [..., L, 1]
