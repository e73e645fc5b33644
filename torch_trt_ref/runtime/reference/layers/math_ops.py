"""Reference semantics of TensorRT's math layers: elementwise, unary, activation, scale,
reduce, softmax, matrix multiply, einsum, top-k, cumulative."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..registry import reference_layer
from .common import DTYPES_BY_NAME, axes_from_mask


def _int_div(a, b):
    # Note [Integer division]: TensorRT's DIV on integer types truncates toward zero (C
    # semantics); torch.div(rounding_mode="trunc") is the same.
    return torch.div(a, b, rounding_mode="trunc")


def _floor_div(a, b):
    return torch.div(a, b, rounding_mode="floor") if not a.is_floating_point() else \
        torch.floor(a / b)


_ELEMENTWISE = {
    "SUM": torch.add, "SUB": torch.sub, "PROD": torch.mul,
    "MAX": torch.maximum, "MIN": torch.minimum, "POW": torch.pow,
    "FLOOR_DIV": _floor_div, "AND": torch.logical_and, "OR": torch.logical_or,
    "XOR": torch.logical_xor, "EQUAL": torch.eq, "GREATER": torch.gt, "LESS": torch.lt,
}


@reference_layer("ELEMENTWISE", "IElementWiseLayer", attrs=("op",))
def elementwise(inputs, op):
    """Binary op with numpy broadcasting over equal-rank inputs; both inputs share a type
    in a strongly typed network. Comparisons give bool; AND/OR/XOR take bool; DIV truncates
    ints toward zero, FLOOR_DIV floors (ints and floats). TensorRT has no MOD: a remainder
    is built from FLOOR_DIV, PROD and SUB.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/ElementWise.html"""
    a, b = inputs
    if op == "DIV":
        return (a / b if a.is_floating_point() else _int_div(a, b),)
    return (_ELEMENTWISE[op](a, b),)


def _round_half_even(x):
    return torch.round(x)  # torch.round rounds half to even, as TensorRT's ROUND does


_UNARY = {
    "EXP": torch.exp, "LOG": torch.log, "SQRT": torch.sqrt, "RECIP": torch.reciprocal,
    "ABS": torch.abs, "NEG": torch.neg, "SIN": torch.sin, "COS": torch.cos,
    "TAN": torch.tan, "SINH": torch.sinh, "COSH": torch.cosh, "ASIN": torch.asin,
    "ACOS": torch.acos, "ATAN": torch.atan, "ASINH": torch.asinh, "ACOSH": torch.acosh,
    "ATANH": torch.atanh, "CEIL": torch.ceil, "FLOOR": torch.floor, "ERF": torch.erf,
    "NOT": torch.logical_not, "SIGN": torch.sign, "ROUND": _round_half_even,
    "ISINF": torch.isinf, "ISNAN": torch.isnan,
}


@reference_layer("UNARY", "IUnaryLayer", attrs=("op",))
def unary(inputs, op):
    """One UnaryOperation elementwise; NOT takes bool, ISINF/ISNAN give bool, ROUND rounds
    half to even.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Unary.html"""
    return (_UNARY[op](inputs[0]),)


_ACTIVATIONS = {
    "RELU": lambda x, a, b: torch.relu(x),
    "SIGMOID": lambda x, a, b: torch.sigmoid(x),
    "TANH": lambda x, a, b: torch.tanh(x),
    "LEAKY_RELU": lambda x, a, b: torch.where(x >= 0, x, x * a),
    "ELU": lambda x, a, b: torch.where(x >= 0, x, a * torch.expm1(x)),
    "SELU": lambda x, a, b: b * torch.where(x >= 0, x, a * torch.expm1(x)),
    "SOFTSIGN": lambda x, a, b: x / (1 + x.abs()),
    "SOFTPLUS": lambda x, a, b: a * torch.logaddexp(b * x, torch.zeros_like(x)),
    "CLIP": lambda x, a, b: x.clamp(max=b).clamp(min=a),  # max(alpha, min(beta, x))
    "HARD_SIGMOID": lambda x, a, b: (a * x + b).clamp(0, 1),
    "SCALED_TANH": lambda x, a, b: a * torch.tanh(b * x),
    "THRESHOLDED_RELU": lambda x, a, b: torch.where(x > a, x, torch.zeros_like(x)),
    "GELU_ERF": lambda x, a, b: F.gelu(x),
    "GELU_TANH": lambda x, a, b: F.gelu(x, approximate="tanh"),
}


@reference_layer("ACTIVATION", "IActivationLayer", attrs=("type", "alpha", "beta"))
def activation(inputs, type, alpha, beta):
    """One ActivationType with its alpha/beta, by the formulas of the _ACTIVATIONS table.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Activation.html"""
    return (_ACTIVATIONS[type](inputs[0], alpha, beta),)


def _reduce_prod(x, dims, keep):
    for d in sorted(dims, reverse=True):
        x = x.prod(d, keepdim=True)
    return x if keep else x.squeeze(tuple(dims)) if dims else x


# Note [empty max/min]
# torch's amax/amin refuse a reduction over an empty dim. TensorRT builds such a reduce and
# does not document its values; we give the reduction's identity (-inf for MAX, +inf for
# MIN, the dtype's extremes for ints), as numpy's ``initial`` would. Converters only reach
# this on empty tensors, where the result is empty or masked out.
def _extreme(largest: bool):
    def run(x, d, k):
        if all(x.shape[i] for i in d):
            return x.amax(d, keepdim=k) if largest else x.amin(d, keepdim=k)
        info = torch.finfo(x.dtype) if x.is_floating_point() else torch.iinfo(x.dtype)
        fill = (-math.inf if largest else math.inf) if x.is_floating_point() else (
            info.min if largest else info.max)
        shape = [1 if i in d else n for i, n in enumerate(x.shape)]
        out = torch.full(shape, fill, dtype=x.dtype, device=x.device)
        return out if k else out.squeeze(tuple(d))
    return run


# Note [Integer average]: TensorRT accepts AVG on int32/int64 and keeps the type without
# documenting the rounding; we divide the exact sum by the count truncating toward zero, as
# its integer DIV does (Note [Integer division]).
def _average(x, d, k):
    if x.is_floating_point():
        return x.mean(d, keepdim=k)
    count = math.prod(x.shape[i] for i in d)
    return _int_div(x.sum(d, keepdim=k), torch.tensor(count))


_REDUCE = {
    "SUM": lambda x, d, k: x.sum(d, keepdim=k),
    "AVG": _average,
    "MAX": _extreme(True),
    "MIN": _extreme(False),
    "PROD": _reduce_prod,
}


@reference_layer("REDUCE", "IReduceLayer", attrs=("op", "axes", "keep_dims"))
def reduce(inputs, op, axes, keep_dims):
    """SUM, PROD, MAX, MIN or AVG over the dims set in the axes bit mask, dropped unless
    keep_dims; the output keeps the input type. (ReduceOperation.NONE exists in
    tensorrt_rtx but add_reduce rejects it.)
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Reduce.html"""
    x = inputs[0]
    dims = axes_from_mask(axes, x.dim())
    if not dims:
        return (x,)
    # torch sums and multiplies int32 into int64; TensorRT keeps the input type.
    return (_REDUCE[op](x, dims, bool(keep_dims)).to(x.dtype),)


@reference_layer("SOFTMAX", "ISoftMaxLayer", attrs=("axes",))
def softmax(inputs, axes):
    """exp(x) / sum(exp(x)) along the one axis set in the mask.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/SoftMax.html"""
    x = inputs[0]
    (dim,) = axes_from_mask(axes, x.dim())
    return (torch.softmax(x, dim),)


def _matrix_operand(x, op):
    if op == "TRANSPOSE":
        return x.transpose(-1, -2)
    return x


@reference_layer("MATRIX_MULTIPLY", "IMatrixMultiplyLayer", attrs=("op0", "op1"))
def matrix_multiply(inputs, op0, op1):
    """Batched matmul with broadcast batch dims; TRANSPOSE swaps an operand's last two dims,
    VECTOR treats its last dim as a vector (the matrix-vector or dot product).
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/MatrixMultiply.html"""
    a, b = inputs
    if op0 == "VECTOR" and op1 == "VECTOR":
        return ((a * b).sum(-1),)
    if op0 == "VECTOR":
        return ((a.unsqueeze(-2) @ _matrix_operand(b, op1)).squeeze(-2),)
    if op1 == "VECTOR":
        return ((_matrix_operand(a, op0) @ b.unsqueeze(-1)).squeeze(-1),)
    a, b = _matrix_operand(a, op0), _matrix_operand(b, op1)
    if 2 < b.dim() <= a.dim() and all(d == 1 for d in b.shape[:-2]):
        # a weight broadcast over the batch: one GEMM over all rows (as torch's linear)
        # instead of a batched GEMM over a stride-0 expansion; the same products
        return (a @ b.reshape(b.shape[-2:]),)
    return (a @ b,)


# Note [Top-k ties]: TensorRT leaves the order of equal values unspecified. We take a stable
# sort, so among equal values the lower index comes first (ONNX TopK's rule, which the
# ONNX parser maps onto this layer); NaN sorts as the largest value, as in torch.
@reference_layer("TOPK", "ITopKLayer", attrs=("op", "k", "axes", "indices_type"))
def topk(inputs, op, k, axes, indices_type="INT32"):
    """The k largest (MAX) or smallest (MIN) along the one axis of the mask, sorted, with
    their indices; input 1 overrides k.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/TopK.html"""
    x = inputs[0]
    if len(inputs) > 1 and inputs[1] is not None:
        k = int(inputs[1].reshape(()))
    (dim,) = axes_from_mask(axes, x.dim())
    values, indices = torch.sort(x, dim=dim, descending=op == "MAX", stable=True)
    values, indices = values.narrow(dim, 0, k), indices.narrow(dim, 0, k)
    return values, indices.to(DTYPES_BY_NAME[indices_type or "INT32"])


@reference_layer("CUMULATIVE", "ICumulativeLayer", attrs=("op", "exclusive", "reverse"))
def cumulative(inputs, op, exclusive, reverse):
    """Running SUM along the axis of input 1 (a 0-D tensor), inclusive or exclusive (the
    first output is 0), forward or from the end; the output keeps the input type.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/c-api/classnvinfer1_1_1_i_cumulative_layer.html"""
    x = inputs[0]
    axis = int(inputs[1].reshape(())) % max(x.dim(), 1)
    if op != "SUM":
        raise NotImplementedError(f"cumulative {op}")
    if reverse:
        x = x.flip(axis)
    out = x.cumsum(axis).to(x.dtype)
    if exclusive:  # shift by one rather than subtract x: exact, and no inf - inf
        first = torch.zeros_like(x.narrow(axis, 0, min(1, x.shape[axis])))
        out = torch.cat([first, out.narrow(axis, 0, max(x.shape[axis] - 1, 0))], axis)
    return (out.flip(axis) if reverse else out,)


def _scale_coefficient(weights, default: float, x, mode: str, channel_axis: int):
    """Scale/shift/power weights broadcast against x: one value (UNIFORM), one per channel
    along channel_axis (CHANNEL), or one per element of the dims from channel_axis on
    (ELEMENTWISE). Empty weights take the default."""
    if weights is None:
        return torch.tensor(default, dtype=torch.float32, device=x.device)
    weights = weights.float()
    if mode == "UNIFORM":
        return weights.reshape(())
    if mode == "CHANNEL":
        return weights.reshape([-1] + [1] * (x.dim() - channel_axis - 1))
    return weights.reshape(x.shape[channel_axis:])


@reference_layer("SCALE", "IScaleLayer", attrs=("mode", "channel_axis"),
                 weights=("shift", "scale", "power"))
def scale(inputs, mode, channel_axis, shift, scale, power):
    """out = (x * scale + shift) ** power, coefficients per tensor, channel or element;
    defaults shift 0, scale 1, power 1. Computed in float32.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/python-api/infer/Graph/Layers.html#iscalelayer"""
    x = inputs[0]
    channel_axis = channel_axis % x.dim()

    def coef(w, default):
        return _scale_coefficient(w, default, x, mode, channel_axis)

    y = x.float() * coef(scale, 1.0) + coef(shift, 0.0)
    if power is not None:
        y = y ** coef(power, 1.0)
    return (y.to(x.dtype),)


@reference_layer("EINSUM", "IEinsumLayer", attrs=("equation",))
def einsum(inputs, equation):
    """Einstein summation over the inputs (implicit or explicit '->' output); TensorRT
    rejects ellipsis and diagonals (a label repeated within one input), which torch.einsum
    would accept. The output has the inputs' type.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/python-api/infer/Graph/Layers.html#ieinsumlayer"""
    return (torch.einsum(equation, *inputs).to(inputs[0].dtype),)
