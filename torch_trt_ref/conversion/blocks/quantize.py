"""Quantizer building blocks (DESIGN D13): ``qdq`` (an IQuantizeLayer + IDequantizeLayer
pair), ``quantize_activation`` (a per-tensor INT8/FP8 quantizer on a network tensor, with
the narrow-range clamp) and ``constant_value`` (a build-time tensor such as an amax)."""

from __future__ import annotations

import operator
from typing import Optional

import torch
from torch.fx import Node

from ..._trt import to_trt_dtype, trt
from ...quantization.ops import FP8_MAX
from .. import helpers
from .._trt_ops import EW

MAX_VALUE = {"int8": 127.0, "fp8": FP8_MAX}
TRT_TYPE = {"int8": trt.int8, "fp8": trt.fp8}


def constant_value(value) -> Optional[torch.Tensor]:
    """The tensor of a get_attr node (a weight or buffer), else None."""
    if isinstance(value, Node) and value.op == "get_attr":
        return operator.attrgetter(value.target)(value.graph.owning_module)
    return value if isinstance(value, torch.Tensor) else None


def qdq(ctx, x, scale, to_type, dtype: torch.dtype, axis: int = 0):
    """x -> IQuantizeLayer(to_type) -> IDequantizeLayer(dtype), both with ``scale``."""
    q = ctx.name_layer(ctx.net.add_quantize(x, scale, to_type), "quantize")
    q.axis = axis
    dq = ctx.name_layer(ctx.net.add_dequantize(q.get_output(0), scale, to_trt_dtype(dtype)),
                        "dequantize")
    dq.axis = axis
    return dq.get_output(0)


def quantize_activation(ctx, x, amax: torch.Tensor, fmt: str, narrow_range: bool,
                        dtype: Optional[torch.dtype] = None):
    """A per-tensor quantizer ('int8' or 'fp8') on the network tensor ``x``, in ``dtype``
    (default: x's; x is cast to it first): scale amax / 127 or amax / 448 in that dtype
    (computed in torch from the amax constant, so the weight program replays it on a
    refit); a narrow-range INT8 quantizer first clamps x at -amax (Note [Narrow range],
    converters/quantize.py)."""
    dtype = dtype or helpers.dtype_of(x)
    x = helpers.cast(ctx, x, dtype)
    scale = (amax.float() / MAX_VALUE[fmt]).to(dtype).reshape(())
    if fmt == "int8" and narrow_range:
        x = helpers.elementwise(ctx, EW.MAX, x, -amax.to(dtype).reshape(amax.shape))
    return qdq(ctx, x, ctx.constant(scale), TRT_TYPE[fmt], dtype)
