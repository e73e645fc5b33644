"""Conformance cases: the fused SDPA kernels (flash, efficient, cuDNN). Note [CPU oracle]:
they have no CPU kernel, so eager runs ``_scaled_dot_product_flash_attention_for_cpu``
(torch's CPU kernel of the same attention, with its log-sum-exp) on the same arguments;
export traces the fused op itself."""

import torch

from ..case import Case, T

aten = torch.ops.aten
Q, KV = T((1, 2, 4, 8), dynamic=(2,)), T((1, 2, 6, 8), dynamic=(2,))
BIAS = T((1, 2, 4, 6), low=-1.0, high=1.0, dynamic=(2, 3))


def _cpu(q, k, v, is_causal=False, scale=None, bias=None):
    return aten._scaled_dot_product_flash_attention_for_cpu.default(
        q, k, v, is_causal=is_causal, attn_mask=bias, scale=scale)


def flash(q, k, v, is_causal=False, scale=None):
    try:
        out = aten._scaled_dot_product_flash_attention.default(q, k, v, is_causal=is_causal,
                                                               scale=scale)
    except NotImplementedError:  # eager on CPU: Note [CPU oracle]
        out = _cpu(q, k, v, is_causal, scale)
    return out[0], out[1]


def efficient(q, k, v, bias=None, is_causal=False, scale=None):
    try:
        out = aten._scaled_dot_product_efficient_attention.default(
            q, k, v, bias, False, is_causal=is_causal, scale=scale)
    except NotImplementedError:
        out = _cpu(q, k, v, is_causal, scale, bias)
    return out[0]


def cudnn(q, k, v, bias=None, is_causal=False, scale=None):
    try:
        out = aten._scaled_dot_product_cudnn_attention.default(
            q, k, v, bias, True, is_causal=is_causal, scale=scale)
        return out[0], out[1]
    except NotImplementedError:
        out = _cpu(q, k, v, is_causal, scale, bias)
        return out[0], out[1].unsqueeze(-1)


FLASH = aten._scaled_dot_product_flash_attention.default
EFFICIENT = aten._scaled_dot_product_efficient_attention.default
CUDNN = aten._scaled_dot_product_cudnn_attention.default

CASES = [
    Case(flash, (Q, KV, KV), check_op=FLASH),
    Case(flash, (Q, KV, KV), {"is_causal": True, "scale": 0.5}, check_op=FLASH,
         name="causal"),
    Case(efficient, (Q, KV, KV), check_op=EFFICIENT),
    Case(efficient, (Q, KV, KV, BIAS), {"is_causal": True}, check_op=EFFICIENT, name="bias"),
    Case(cudnn, (Q, KV, KV), check_op=CUDNN),
    Case(cudnn, (Q, KV, KV, BIAS), {"scale": 0.3}, check_op=CUDNN, name="bias"),
]
