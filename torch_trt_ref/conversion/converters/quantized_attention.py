"""The converter of ``torch_trt_ref::quantized_sdpa`` (quantized attention as one op, Note
[Quantized attention is one node] in quantization/attention_op.py): Q/DQ on q, k, v, then
Q·Kᵀ * scale, the causal and attention masks, softmax, Q/DQ on P and P·V, in the strongly
typed network; TensorRT's builder fuses this Q/DQ-matmul-softmax-Q/DQ-matmul pattern."""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch.fx import Node

from ...quantization.attention_op import AMAX, QUANTIZED_SDPA
from ...quantization.ops import format_of
from .. import helpers
from .._trt_ops import EW
from ..blocks.elementwise import opmath
from ..blocks.linalg import mask_future, matmul
from ..blocks.nodes import FLOAT_DTYPES, fake, node_args
from ..blocks.quantize import MAX_VALUE, constant_value, quantize_activation
from ..blocks.reduce import where
from ..blocks.shape import repeat_heads
from ..registry import converter


def _quantized_attention_ok(node: Node, settings) -> Optional[str]:
    """What TensorRT rejects, so the op runs in PyTorch (its eager kernel) instead."""
    args = node_args(node)
    fmt = format_of(args["num_bits"], args["exponent_bits"])
    if fmt not in MAX_VALUE:
        return (f"TensorRT quantizes to INT8 (num_bits 8, exponent_bits 0) or FP8 E4M3 (8, 4) "
                f"only, not ({args['num_bits']}, {args['exponent_bits']})")
    if args["dropout_p"] != 0.0:
        return "attention dropout is random and stays in PyTorch"
    q, k = fake(args["query"]), fake(args["key"])
    if any(fake(args[n]) is None or fake(args[n]).dtype not in FLOAT_DTYPES
           for n in ("query", "key", "value")):
        return "TensorRT quantizes fp32/fp16/bf16 tensors only"
    mask = fake(args["attn_mask"])
    if mask is not None and mask.dtype not in (torch.bool, q.dtype):
        return f"the attention mask is {mask.dtype}: bool or the query's {q.dtype} only"
    if args["scale"] is None and not isinstance(q.shape[-1], int):
        return "the default scale 1/sqrt(head dim) needs a static head dim"
    if args["enable_gqa"]:
        hq, hk = q.shape[-3], k.shape[-3]
        if not (isinstance(hq, int) and isinstance(hk, int)) or hk == 0 or hq % hk:
            return "grouped-query attention needs static head counts, query's a multiple of key's"
    for name in AMAX:
        amax = constant_value(args[name])
        if amax is None:
            return f"{name} is computed at run time; TensorRT needs a build-time scale"
        if amax.numel() != 1:
            return f"TensorRT quantizes activations per tensor only ({name} is per channel)"
        if not bool(torch.isfinite(amax).all() & (amax > 0).all()):
            return (f"{name} of 0 (or inf/NaN) gives a scale TensorRT rejects (scales must be "
                    "> 0)")
    return None


# Note [Quantized attention in half precision]: the eager quantizer steps in float32 with
# the float32 scale amax / 127 (Note [Quantizer arithmetic]); an fp16 scale is another grid
# (2 / 127 rounds by 3e-5 relative), and between the matmuls the moved grid points flip
# codes of P by a whole quantization step (3 of 7 fp16 conformance cells failed the float64
# rule: RMSE 1.5 times the allowance, max error 43 times eager's). So for fp16/bf16 inputs the
# quantizers run in float32 with the float32 scale, as the eager kernel does, and so does
# the arithmetic between them (torch's opmath, as the fused attention block computes); the
# output is cast back. In float32 nothing is cast.
@converter(QUANTIZED_SDPA, validator=_quantized_attention_ok, dynamic=True, family="quantize",
           constants=AMAX)
def quantized_sdpa(ctx, query, key, value, amax_q, amax_k, amax_v, amax_p, attn_mask=None,
                   dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False, num_bits=8,
                   exponent_bits=0, narrow_range=True):
    """The eager kernel's steps, in its order: Q(q), Q(k), Q(v) (each an
    IQuantize/IDequantize pair with scale amax / 127 or / 448), key/value heads repeated
    for GQA, scores = Q(q) Q(k)ᵀ * scale, key j > query i set to -inf when causal, a bool
    mask's False positions set to -inf or a float mask added, softmax over the keys, Q(P),
    and Q(P) Q(v); fp16/bf16 inputs computed in float32 (Note [Quantized attention in half
    precision])."""
    fmt = format_of(num_bits, exponent_bits)
    dtype = helpers.dtype_of(query)
    compute = opmath(dtype)  # Note [Quantized attention in half precision]
    q, k, v = (quantize_activation(ctx, helpers.itensor(ctx, t), a, fmt, narrow_range, compute)
               for t, a in ((query, amax_q), (key, amax_k), (value, amax_v)))
    if enable_gqa and q.shape[-3] != k.shape[-3]:
        groups = q.shape[-3] // k.shape[-3]
        k, v = repeat_heads(ctx, k, groups), repeat_heads(ctx, v, groups)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = helpers.elementwise(ctx, EW.PROD, matmul(ctx, q, k, True), scale, compute)
    if is_causal:
        scores = mask_future(ctx, scores)
    if attn_mask is not None:
        mask = helpers.itensor(ctx, attn_mask)
        scores = (where(ctx, mask, scores, float("-inf"))
                  if helpers.dtype_of(mask) == torch.bool else
                  helpers.elementwise(ctx, EW.SUM, scores, mask, compute))
    rank = len(scores.shape)  # a mask of higher rank broadcasts the scores up
    softmax = ctx.net.add_softmax(scores)
    softmax.axes = 1 << (rank - 1)
    p = ctx.name_layer(softmax, "softmax").get_output(0)
    p = quantize_activation(ctx, p, amax_p, fmt, narrow_range)
    return helpers.cast(ctx, matmul(ctx, p, v), dtype)
