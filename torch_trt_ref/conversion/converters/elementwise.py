"""Binary elementwise converters (arithmetic with torch type promotion and broadcasting,
comparisons, logical and bitwise ops, where, clamp), plus the small building blocks the
unary and activation families reuse (select, to_bool, trunc, opmath)."""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch.fx import Node

from .. import helpers
from .._trt_ops import EW, UN
from ..blocks.elementwise import (
    binary,
    floor_divide,
    is_negative,
    is_scalar,
    opmath,
    select,
    tensor,
    to_bool,
    trunc_divide,
)
from ..blocks.nodes import all_of, plain_dtypes_ok
from ..helpers import unary
from ..registry import converter

aten = torch.ops.aten


# ---------------------------------------------------------------------------------------
# Building blocks.


# ---------------------------------------------------------------------------------------
# Validators shared by the elementwise, unary and activation families.


# ---------------------------------------------------------------------------------------
# Arithmetic: one table, one registration loop.

_ARITHMETIC = {
    EW.SUM: (aten.add.Tensor, aten.add.Scalar),
    EW.SUB: (aten.sub.Tensor, aten.sub.Scalar),
    EW.PROD: (aten.mul.Tensor, aten.mul.Scalar),
    EW.MAX: (aten.maximum.default,),
    EW.MIN: (aten.minimum.default,),
}


def _register_arithmetic(op, targets):
    @converter(*targets, dynamic=True, validator=plain_dtypes_ok)
    def convert(ctx, input, other, alpha=1):
        dtype = ctx.out_dtype
        if alpha != 1:
            other = binary(ctx, EW.PROD, other, alpha, dtype)
        return binary(ctx, op, input, other, dtype)


for _op, _targets in _ARITHMETIC.items():
    _register_arithmetic(_op, _targets)


@converter(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar, dynamic=True,
           validator=plain_dtypes_ok)
def pow_(ctx, input, exponent):
    """Small integral scalar exponents (x**2, x**3, as in GELU-tanh) become products: exact,
    and defined for negative bases whatever POW does with them."""
    dtype = ctx.out_dtype
    if is_scalar(exponent) and exponent in (2, 3):
        x = tensor(ctx, input, dtype)
        out = binary(ctx, EW.PROD, x, x, dtype)
        return binary(ctx, EW.PROD, out, x, dtype) if exponent == 3 else out
    return binary(ctx, EW.POW, input, exponent, dtype)


# ---------------------------------------------------------------------------------------
# Division family and other composites: fn(ctx, a, b, dtype) -> ITensor.

def _div(ctx, a, b, dtype, rounding_mode=None):
    if rounding_mode is None:
        return binary(ctx, EW.DIV, a, b, dtype)
    compute = opmath(dtype)
    if rounding_mode == "floor":
        return floor_divide(ctx, a, b, compute)
    return trunc_divide(ctx, a, b, compute)


def _remainder(ctx, a, b, dtype):
    """Python's ``%``: the result has the sign of the divisor."""
    compute = opmath(dtype)
    a, b = tensor(ctx, a, compute), tensor(ctx, b, compute)
    product = binary(ctx, EW.PROD, floor_divide(ctx, a, b, compute), b, compute)
    return binary(ctx, EW.SUB, a, product, compute)


def _fmod(ctx, a, b, dtype):
    """C's ``fmod``: the result has the sign of the dividend."""
    compute = opmath(dtype)
    a, b = tensor(ctx, a, compute), tensor(ctx, b, compute)
    product = binary(ctx, EW.PROD, trunc_divide(ctx, a, b, compute), b, compute)
    return binary(ctx, EW.SUB, a, product, compute)


def _atan2(ctx, y, x, dtype):
    """atan(y / x) moved to the right quadrant (x < 0 adds +-pi by the sign bit of y);
    x == 0 gives sign(y) * pi / 2."""
    compute = opmath(dtype)
    y, x = tensor(ctx, y, compute), tensor(ctx, x, compute)
    angle = unary(ctx, UN.ATAN, binary(ctx, EW.DIV, y, x, compute))
    half_turn = select(ctx, is_negative(ctx, y), tensor(ctx, -math.pi, compute),
                       tensor(ctx, math.pi, compute))  # -0.0 takes -pi, as in C
    angle = select(ctx, binary(ctx, EW.LESS, x, 0, compute),
                   binary(ctx, EW.SUM, angle, half_turn, compute), angle)
    on_axis = binary(ctx, EW.PROD, unary(ctx, UN.SIGN, y), math.pi / 2, compute)
    return select(ctx, binary(ctx, EW.EQUAL, x, 0, compute), on_axis, angle)


def _copysign(ctx, a, b, dtype):
    magnitude = unary(ctx, UN.ABS, tensor(ctx, a, dtype))
    if is_scalar(b):
        return unary(ctx, UN.NEG, magnitude) if math.copysign(1, b) < 0 else magnitude
    return select(ctx, is_negative(ctx, tensor(ctx, b, dtype)), unary(ctx, UN.NEG, magnitude),
                  magnitude)


def _hypot(ctx, a, b, dtype):
    compute = opmath(dtype)
    a, b = tensor(ctx, a, compute), tensor(ctx, b, compute)
    squares = binary(ctx, EW.SUM, binary(ctx, EW.PROD, a, a, compute),
                     binary(ctx, EW.PROD, b, b, compute), compute)
    return unary(ctx, UN.SQRT, squares)


def _nan_ignoring(op):
    """fmax/fmin: like maximum/minimum, but a NaN loses against a number."""

    def build(ctx, a, b, dtype):
        a, b = tensor(ctx, a, dtype), tensor(ctx, b, dtype)
        out = binary(ctx, op, a, b, dtype)
        if not dtype.is_floating_point:
            return out
        out = select(ctx, unary(ctx, UN.ISNAN, b), a, out)
        return select(ctx, unary(ctx, UN.ISNAN, a), b, out)

    return build


_COMPOSITES: dict[Any, Callable] = {
    aten.div.Tensor: _div, aten.div.Scalar: _div,
    aten.div.Tensor_mode: _div, aten.div.Scalar_mode: _div,
    aten.remainder.Tensor: _remainder, aten.remainder.Scalar: _remainder,
    aten.remainder.Scalar_Tensor: _remainder,
    aten.fmod.Tensor: _fmod, aten.fmod.Scalar: _fmod,
    aten.atan2.default: _atan2,
    aten.floor_divide.default: lambda ctx, a, b, dtype: _div(ctx, a, b, dtype, "floor"),
    aten.floor_divide.Scalar: lambda ctx, a, b, dtype: _div(ctx, a, b, dtype, "floor"),
    aten.copysign.Tensor: _copysign, aten.copysign.Scalar: _copysign,
    aten.hypot.default: _hypot,
    aten.fmax.default: _nan_ignoring(EW.MAX), aten.fmin.default: _nan_ignoring(EW.MIN),
}


def _rounding_mode_ok(node: Node, settings) -> str | None:
    mode = node.kwargs.get("rounding_mode")
    if mode not in (None, "trunc", "floor"):
        return f"unknown rounding_mode {mode!r}"
    return None


def _register_composite(target, build):
    @converter(target, dynamic=True, validator=all_of(plain_dtypes_ok, _rounding_mode_ok))
    def convert(ctx, input, other, **kwargs):
        return build(ctx, input, other, ctx.out_dtype, **kwargs)


for _target, _build in _COMPOSITES.items():
    _register_composite(_target, _build)


# Note [out= variants]: functionalization rewrites ``torch.atan2(y, x, out=buf)`` into
# ``buf = aten.atan2.default(y, x)`` (a copy back when ``buf`` is an input), so exported
# graphs carry the functional op. The out= overload is converted for graphs that keep it:
# its result is the functional one and ``out`` only supplies the dtype.
@converter(aten.atan2.out, dynamic=True, validator=plain_dtypes_ok)
def atan2_out(ctx, input, other, out):
    return _atan2(ctx, input, other, ctx.out_dtype)


# ---------------------------------------------------------------------------------------
# Comparisons: computed in the promoted input dtype, bool result. Note [NaN compares]:
# le/ge are LESS|EQUAL and GREATER|EQUAL, never NOT GREATER, so NaN compares false.

_COMPARISONS = {
    "eq": (EW.EQUAL, False, None), "ne": (EW.EQUAL, True, None),
    "lt": (EW.LESS, False, None), "gt": (EW.GREATER, False, None),
    "le": (EW.LESS, False, EW.EQUAL), "ge": (EW.GREATER, False, EW.EQUAL),
}


def _register_comparison(name, op, negate, or_op):
    packet = getattr(aten, name)

    @converter(packet.Tensor, packet.Scalar, dynamic=True, validator=plain_dtypes_ok)
    def convert(ctx, input, other):
        dtype = helpers.result_type(input, other)
        if dtype == torch.bool and op != EW.EQUAL:  # LESS/GREATER reject bool
            dtype = torch.int32
        a, b = tensor(ctx, input, dtype), tensor(ctx, other, dtype)
        out = binary(ctx, op, a, b, dtype)
        if or_op is not None:
            out = binary(ctx, EW.OR, out, binary(ctx, or_op, a, b, dtype), torch.bool)
        return unary(ctx, UN.NOT, out) if negate else out


for _name, _spec in _COMPARISONS.items():
    _register_comparison(_name, *_spec)


# ---------------------------------------------------------------------------------------
# Logical ops (any dtype, by truthiness) and bitwise ops (bool only).

_LOGICAL = {
    EW.AND: (aten.logical_and.default,),
    EW.OR: (aten.logical_or.default,),
    EW.XOR: (aten.logical_xor.default,),
}
_BITWISE = {
    EW.AND: (aten.bitwise_and.Tensor, aten.bitwise_and.Scalar, aten.bitwise_and.Scalar_Tensor),
    EW.OR: (aten.bitwise_or.Tensor, aten.bitwise_or.Scalar, aten.bitwise_or.Scalar_Tensor),
    EW.XOR: (aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar, aten.bitwise_xor.Scalar_Tensor),
}


def bool_ok(node: Node, settings) -> str | None:
    """Validator: TensorRT has no integer bitwise ops, only logical ops on bool."""
    for arg in node.args:
        val = arg.meta.get("val") if isinstance(arg, Node) else arg
        dtype = val.dtype if isinstance(val, torch.Tensor) else type(val)
        if dtype not in (torch.bool, bool):
            return f"bitwise ops are supported on bool only (got {dtype})"
    return None


def _register_logical(op, targets, validator=plain_dtypes_ok):
    @converter(*targets, dynamic=True, validator=validator)
    def convert(ctx, input, other):
        return binary(ctx, op, to_bool(ctx, input), to_bool(ctx, other), torch.bool)


for _op, _targets in _LOGICAL.items():
    _register_logical(_op, _targets)
for _op, _targets in _BITWISE.items():
    _register_logical(_op, _targets, bool_ok)


@converter(aten.logical_not.default, dynamic=True, validator=plain_dtypes_ok)
def logical_not(ctx, input):
    return unary(ctx, UN.NOT, to_bool(ctx, input))


@converter(aten.bitwise_not.default, dynamic=True, validator=bool_ok)
def bitwise_not(ctx, input):
    return unary(ctx, UN.NOT, input)


# ---------------------------------------------------------------------------------------
# where and clamp.

@converter(aten.where.self, dynamic=True, validator=plain_dtypes_ok)
def where(ctx, condition, input, other):
    dtype = ctx.out_dtype
    return select(ctx, to_bool(ctx, condition), tensor(ctx, input, dtype),
                  tensor(ctx, other, dtype))


@converter(aten.clamp.default, aten.clamp.Tensor, dynamic=True, validator=plain_dtypes_ok)
def clamp(ctx, input, min=None, max=None):
    dtype = ctx.out_dtype
    out = tensor(ctx, input, dtype)
    if min is not None:
        out = binary(ctx, EW.MAX, out, min, dtype)
    if max is not None:
        out = binary(ctx, EW.MIN, out, max, dtype)
    return out
