"""The fused scaled-dot-product attention kernels torch picks on GPUs (flash, efficient,
cuDNN), as matmul -> softmax -> matmul: the attention output and its log-sum-exp. Their
other outputs (RNG state, sequence bookkeeping, debug mask) have no meaning in an engine."""

from __future__ import annotations

import operator

import torch
from torch.fx import Node

from .. import dims as D
from .. import helpers
from ..blocks.linalg import attention
from ..blocks.nodes import FLOAT_DTYPES, fake, node_args
from ..registry import converter

aten = torch.ops.aten
FLASH = aten._scaled_dot_product_flash_attention.default
EFFICIENT = aten._scaled_dot_product_efficient_attention.default
CUDNN = aten._scaled_dot_product_cudnn_attention.default
# Outputs we produce per kernel: the attention output and, where its shape is the plain
# [B, H, L] (cuDNN: [B, H, L, 1]), the log-sum-exp. The efficient kernel pads its
# log-sum-exp to a multiple of 32 rows with unspecified values.
PRODUCED = {FLASH: (0, 1), EFFICIENT: (0,), CUDNN: (0, 1)}


def _kernel_outputs_ok(node: Node, settings) -> str | None:
    """Validator of the fused attention kernels: no dropout, float inputs, and only the
    outputs we produce (``PRODUCED``) are read."""
    args = node_args(node)
    if args["dropout_p"] != 0.0:
        return "attention dropout is random and stays in PyTorch"
    if fake(args["query"]).dtype not in FLOAT_DTYPES:
        return "attention takes float inputs only"
    produced = PRODUCED[node.target]
    for user in node.users:
        if user.target is not operator.getitem or user.args[1] not in produced:
            index = user.args[1] if user.target is operator.getitem else "tuple"
            return f"output {index} of {node.target.__name__} (RNG state, sequence " \
                   f"bookkeeping, padded log-sum-exp or debug mask) is not produced"
    return None


@converter(FLASH, validator=_kernel_outputs_ok, dynamic=True)
def flash_attention(ctx, query, key, value, dropout_p=0.0, is_causal=False,
                    return_debug_mask=False, scale=None):
    out, lse = attention(ctx, query, key, value, None, is_causal, scale)
    lse = D.reshape(ctx, lse, D.dims_of(ctx, lse)[:-1])
    return (out, helpers.cast(ctx, lse, ctx.out_meta[1].dtype)) + (None,) * 7


@converter(EFFICIENT, validator=_kernel_outputs_ok, dynamic=True)
def efficient_attention(ctx, query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0,
                        is_causal=False, scale=None):
    out, _ = attention(ctx, query, key, value, attn_bias, is_causal, scale)
    return out, None, None, None


@converter(CUDNN, validator=_kernel_outputs_ok, dynamic=True)
def cudnn_attention(ctx, query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0,
                    is_causal=False, return_debug_mask=False, scale=None):
    out, lse = attention(ctx, query, key, value, attn_bias, is_causal, scale)
    return (out, helpers.cast(ctx, lse, ctx.out_meta[1].dtype)) + (None,) * 7
