"""``torch_trt_ref::quantized_sdpa``: scaled-dot-product attention with per-tensor quantizers
on q, k, v and the softmax output P, as ONE op (Note [Quantized attention is one node]): its
CPU/CUDA kernel is the fake-quantized math, its fake kernel the same math without the
quantizers, and ``conversion/converters/quantized_attention.py`` builds it in TensorRT."""

from __future__ import annotations

import math
from typing import Callable

import torch

from . import ops

# Note [Quantized attention is one node]: P (the softmax output) exists only inside a fused
# SDPA, so quantized attention cannot stay ``aten.scaled_dot_product_attention``; written out
# as matmul, mul (the scale), where (a bool mask), softmax and matmul, it put ops into the
# exported graph that the fp32 graph (one fused SDPA node, kept whole by lowering: Note
# [Composites kept whole]) does not have, and ``torch_executed_ops={"aten.mul.Tensor"}`` then
# cut every quantized attention into pieces (bert_tiny_2l int8: 3 engines, fp32 1). As one
# op it partitions exactly as the fused SDPA does, and its converter emits the Q/DQ layers.
SCHEMA = ("(Tensor query, Tensor key, Tensor value, Tensor amax_q, Tensor amax_k, "
          "Tensor amax_v, Tensor amax_p, Tensor? attn_mask=None, float dropout_p=0.0, "
          "bool is_causal=False, float? scale=None, bool enable_gqa=False, int num_bits=8, "
          "int exponent_bits=0, bool narrow_range=True) -> Tensor")
ROLES = "qkvp"  # the quantized tensors: query, key, value, softmax output P
AMAX = tuple(f"amax_{r}" for r in ROLES)  # their amax arguments, in schema order


def sdpa_math(quantize: Callable[[str, torch.Tensor], torch.Tensor], query, key, value,
              attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """scaled_dot_product_attention's math with ``quantize(role, x)`` applied to q, k, v and P
    (role in 'qkvp'): softmax(Q(q) Q(k)ᵀ * scale + mask) -> Q(P) @ Q(v). A bool mask keeps
    True positions; is_causal masks key j > query i; enable_gqa repeats each key/value head."""
    q, k, v = quantize("q", query), quantize("k", key), quantize("v", value)
    if enable_gqa and q.shape[-3] != k.shape[-3]:
        groups = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(groups, -3), v.repeat_interleave(groups, -3)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if is_causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        scores = (scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool
                  else scores + attn_mask)
    p = torch.softmax(scores, dim=-1)
    if dropout_p:
        p = torch.nn.functional.dropout(p, dropout_p)
    return torch.matmul(quantize("p", p), v)


def _kernel(query, key, value, amax_q, amax_k, amax_v, amax_p, attn_mask=None, dropout_p=0.0,
            is_causal=False, scale=None, enable_gqa=False, num_bits=8, exponent_bits=0,
            narrow_range=True):
    """The eager op: each quantizer is ``tensorrt::quantize_op`` with its amax, exactly the
    call a ``TensorQuantizer`` makes (so the op equals the unfused quantizer modules)."""
    amax = dict(zip(ROLES, (amax_q, amax_k, amax_v, amax_p)))

    def quantize(role, x):
        return ops.quantize_op(x, amax[role], num_bits, exponent_bits, False, narrow_range)

    return sdpa_math(quantize, query, key, value, attn_mask, dropout_p, is_causal, scale,
                     enable_gqa)


def _fake(query, key, value, amax_q, amax_k, amax_v, amax_p, attn_mask=None, dropout_p=0.0,
          is_causal=False, scale=None, enable_gqa=False, num_bits=8, exponent_bits=0,
          narrow_range=True):
    """The same math on fake tensors (quantizers keep shape and dtype): the output's shape
    follows every broadcast of q, k, v and the mask."""
    return sdpa_math(lambda role, x: x, query, key, value, attn_mask, 0.0, is_causal, scale,
                     enable_gqa)


def register():
    """Define the op once (the module may be imported again under another name)."""
    if not hasattr(torch.ops.torch_trt_ref, "quantized_sdpa"):
        torch.library.define("torch_trt_ref::quantized_sdpa", SCHEMA)
        torch.library.impl("torch_trt_ref::quantized_sdpa", ["cpu", "cuda"])(_kernel)
        torch.library.register_fake("torch_trt_ref::quantized_sdpa")(_fake)
    return torch.ops.torch_trt_ref.quantized_sdpa.default


QUANTIZED_SDPA = register()
