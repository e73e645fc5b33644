"""Activation converters: ops that map onto TensorRT's IActivationLayer (relu, sigmoid,
tanh, leaky_relu, elu, gelu, hardtanh, hardsigmoid, softplus, prelu). Ops torch decomposes
before conversion (silu, hardswish, softplus, ...) arrive here as their parts."""

from __future__ import annotations

import torch
from torch.fx import Node

from .. import helpers
from .._trt_ops import ACT, EW
from ..blocks.elementwise import binary, select, tensor
from ..blocks.nodes import all_of, node_args, plain_dtypes_ok
from ..registry import converter

aten = torch.ops.aten


def _float_input(ctx, x):
    """Activations other than RELU take float inputs only; torch's result dtype is float
    for integer inputs (sigmoid(int) is float32)."""
    return tensor(ctx, x, ctx.out_dtype)


@converter(aten.relu.default, dynamic=True, validator=plain_dtypes_ok)
def relu(ctx, input):
    return helpers.activation(ctx, ACT.RELU, input)  # RELU also takes int32/int64


_SIMPLE = {aten.sigmoid.default: ACT.SIGMOID, aten.tanh.default: ACT.TANH}


def _register_simple(target, kind):
    @converter(target, dynamic=True, validator=plain_dtypes_ok)
    def convert(ctx, input):
        return helpers.activation(ctx, kind, _float_input(ctx, input))


for _target, _kind in _SIMPLE.items():
    _register_simple(_target, _kind)


@converter(aten.leaky_relu.default, dynamic=True, validator=plain_dtypes_ok)
def leaky_relu(ctx, input, negative_slope=0.01):
    return helpers.activation(ctx, ACT.LEAKY_RELU, _float_input(ctx, input),
                              alpha=float(negative_slope))


def _elu_ok(node: Node, settings) -> str | None:
    input_scale = node_args(node)["input_scale"]
    if input_scale <= 0:
        return "elu with input_scale <= 0 is not supported"
    return None


@converter(aten.elu.default, dynamic=True, validator=all_of(plain_dtypes_ok, _elu_ok))
def elu(ctx, input, alpha=1, scale=1, input_scale=1):
    """scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1)): one ELU, or SELU
    (beta = scale); input_scale != 1 (celu-style) runs ELU on the scaled input for the
    negative branch and selects x itself where x > 0."""
    x = _float_input(ctx, input)
    if input_scale == 1:
        if scale == 1:
            return helpers.activation(ctx, ACT.ELU, x, alpha=float(alpha))
        return helpers.activation(ctx, ACT.SELU, x, alpha=float(alpha), beta=float(scale))
    dtype = helpers.dtype_of(x)
    negative = helpers.activation(ctx, ACT.ELU, binary(ctx, EW.PROD, x, input_scale, dtype),
                                  alpha=float(alpha))
    out = select(ctx, binary(ctx, EW.GREATER, x, 0, dtype), x, negative)
    return binary(ctx, EW.PROD, out, scale, dtype) if scale != 1 else out


_GELU = {"none": ACT.GELU_ERF, "tanh": ACT.GELU_TANH}


def _gelu_ok(node: Node, settings) -> str | None:
    mode = node.kwargs.get("approximate", "none")
    return None if mode in _GELU else f"gelu approximate={mode!r} is not supported"


@converter(aten.gelu.default, dynamic=True, validator=all_of(plain_dtypes_ok, _gelu_ok))
def gelu(ctx, input, approximate="none"):
    return helpers.activation(ctx, _GELU[approximate], _float_input(ctx, input))


@converter(aten.hardtanh.default, dynamic=True, validator=plain_dtypes_ok)
def hardtanh(ctx, input, min_val=-1, max_val=1):
    """CLIP for floats; integers (which CLIP rejects) clamp with MAX and MIN."""
    dtype = ctx.out_dtype
    if dtype.is_floating_point:
        return helpers.activation(ctx, ACT.CLIP, tensor(ctx, input, dtype),
                                  alpha=float(min_val), beta=float(max_val))
    out = binary(ctx, EW.MAX, input, min_val, dtype)
    return binary(ctx, EW.MIN, out, max_val, dtype)


# hardsigmoid, softplus and _prelu_kernel reach conversion only where their decomposition
# is disabled (docs/converters.md); TensorRT has an activation kind for the first two.
@converter(aten.hardsigmoid.default, dynamic=True, validator=plain_dtypes_ok)
def hardsigmoid(ctx, input):
    """HARD_SIGMOID: max(0, min(1, alpha x + beta)) with torch's alpha 1/6, beta 1/2."""
    return helpers.activation(ctx, ACT.HARD_SIGMOID, _float_input(ctx, input),
                              alpha=1 / 6, beta=0.5)


@converter(aten.softplus.default, dynamic=True, validator=plain_dtypes_ok)
def softplus(ctx, input, beta=1, threshold=20):
    """SOFTPLUS is alpha log(exp(beta x) + 1); torch returns x itself where
    beta x > threshold (no overflow)."""
    dtype = ctx.out_dtype
    x = _float_input(ctx, input)
    smooth = helpers.activation(ctx, ACT.SOFTPLUS, x, alpha=1 / beta, beta=float(beta))
    linear = binary(ctx, EW.GREATER, binary(ctx, EW.PROD, x, beta, dtype), threshold, dtype)
    return select(ctx, linear, x, smooth)


@converter(aten._prelu_kernel.default, dynamic=True, validator=plain_dtypes_ok)
def prelu_kernel(ctx, input, weight):
    """x where x > 0, else weight * x (weight broadcasts, as the caller shaped it)."""
    dtype = ctx.out_dtype
    x = tensor(ctx, input, dtype)
    negative = binary(ctx, EW.PROD, x, weight, dtype)
    return select(ctx, binary(ctx, EW.GREATER, x, 0, dtype), x, negative)
