"""The fused scaled-dot-product attention kernels torch picks on GPUs (flash, efficient,
cuDNN), as matmul -> softmax -> matmul: the attention output and its log-sum-exp. Their
other outputs (RNG state, sequence bookkeeping, debug mask) have no meaning in an engine."""

from __future__ import annotations

import math
import operator

import torch
from torch.fx import Node

from .. import dims as D
from .. import helpers
from .._trt_ops import EW, RED, UN
from ..registry import converter
from .elementwise import opmath
from .matmul import MAT
from .reductions import positions, reduce, select

aten = torch.ops.aten
FLASH = aten._scaled_dot_product_flash_attention.default
EFFICIENT = aten._scaled_dot_product_efficient_attention.default
CUDNN = aten._scaled_dot_product_cudnn_attention.default
# Outputs we produce per kernel: the attention output and, where its shape is the plain
# [B, H, L] (cuDNN: [B, H, L, 1]), the log-sum-exp. The efficient kernel pads its
# log-sum-exp to a multiple of 32 rows with unspecified values.
PRODUCED = {FLASH: (0, 1), EFFICIENT: (0,), CUDNN: (0, 1)}
FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _arg(node: Node, name: str, default=None):
    names = [a.name for a in node.target._schema.arguments]
    index = names.index(name)
    if index < len(node.args):
        return node.args[index]
    return node.kwargs.get(name, default)


def _sdpa_ok(node: Node, settings) -> str | None:
    if _arg(node, "dropout_p", 0.0) != 0.0:
        return "attention dropout is random and stays in PyTorch"
    if node.args[0].meta["val"].dtype not in FLOATS:
        return "attention takes float inputs only"
    produced = PRODUCED[node.target]
    for user in node.users:
        if user.target is not operator.getitem or user.args[1] not in produced:
            index = user.args[1] if user.target is operator.getitem else "tuple"
            return f"output {index} of {node.target.__name__} (RNG state, sequence " \
                   f"bookkeeping, padded log-sum-exp or debug mask) is not produced"
    return None


def _matmul(ctx, a, b, transpose_b: bool = False):
    layer = ctx.net.add_matrix_multiply(a, MAT.NONE, b,
                                        MAT.TRANSPOSE if transpose_b else MAT.NONE)
    return ctx.name_layer(layer, "matmul").get_output(0)


def attention(ctx, query, key, value, bias, is_causal: bool, scale):
    """(softmax(q k^T * scale + bias) v, logsumexp over the keys), computed in float32
    for half inputs (as torch's kernels accumulate); is_causal masks key j > query i
    (top-left aligned, as torch)."""
    dtype = helpers.dtype_of(query)
    compute = opmath(dtype)
    q, k, v = (helpers.cast(ctx, t, compute) for t in (query, key, value))
    scale = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = helpers.elementwise(ctx, EW.PROD, _matmul(ctx, q, k, True), scale, compute)
    if bias is not None:
        scores = helpers.elementwise(ctx, EW.SUM, scores, helpers.itensor(ctx, bias, compute),
                                     compute)
    if is_causal:
        rank = len(scores.shape)
        row, col = positions(ctx, scores, rank - 2), positions(ctx, scores, rank - 1)
        future = helpers.elementwise(ctx, EW.GREATER, col, row)
        scores = select(ctx, future, float("-inf"), scores)
    last = len(scores.shape) - 1
    peak = reduce(ctx, RED.MAX, scores, [last], True)
    # Note [Fully masked rows]: a query that may attend to no key has peak -inf; torch
    # returns zeros there (and a log-sum-exp of -inf), not the NaN of 0 / 0.
    masked_row = helpers.elementwise(ctx, EW.EQUAL, peak, float("-inf"), compute)
    peak = select(ctx, masked_row, 0.0, peak)
    weights = helpers.unary(ctx, UN.EXP, helpers.elementwise(ctx, EW.SUB, scores, peak))
    total = reduce(ctx, RED.SUM, weights, [last], True)
    out = _matmul(ctx, helpers.elementwise(ctx, EW.DIV, weights, total), v)
    out = select(ctx, masked_row, 0.0, out)
    logsumexp = helpers.elementwise(ctx, EW.SUM, helpers.unary(ctx, UN.LOG, total), peak)
    return helpers.cast(ctx, out, dtype), logsumexp  # logsumexp: [..., L, 1]


@converter(FLASH, validator=_sdpa_ok, dynamic=True)
def flash_attention(ctx, query, key, value, dropout_p=0.0, is_causal=False,
                    return_debug_mask=False, scale=None):
    out, lse = attention(ctx, query, key, value, None, is_causal, scale)
    lse = D.reshape(ctx, lse, D.dims_of(ctx, lse)[:-1])
    return (out, helpers.cast(ctx, lse, ctx.out_meta[1].dtype)) + (None,) * 7


@converter(EFFICIENT, validator=_sdpa_ok, dynamic=True)
def efficient_attention(ctx, query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0,
                        is_causal=False, scale=None):
    out, _ = attention(ctx, query, key, value, attn_bias, is_causal, scale)
    return out, None, None, None


@converter(CUDNN, validator=_sdpa_ok, dynamic=True)
def cudnn_attention(ctx, query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0,
                    is_causal=False, return_debug_mask=False, scale=None):
    out, lse = attention(ctx, query, key, value, attn_bias, is_causal, scale)
    return (out, helpers.cast(ctx, lse, ctx.out_meta[1].dtype)) + (None,) * 7
