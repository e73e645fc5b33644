"""Unary math converters: one table of (overload -> how to build it, integer policy) and one
registration loop. Composite ops compute in float32 for half inputs (torch's opmath)."""

from __future__ import annotations

import math
from typing import Callable

import torch

from .. import helpers
from .._trt_ops import EW, UN
from ..blocks.elementwise import binary, is_negative, opmath, select, tensor, trunc
from ..blocks.nodes import plain_dtypes_ok
from ..helpers import unary
from ..registry import converter

aten = torch.ops.aten

# Integer policies: FLOAT computes in the float output dtype torch infers (exp(int) is
# float); KEEP runs on ints as they are (TensorRT's ABS/NEG/SIGN accept int32/int64);
# IDENTITY returns integers unchanged (ceil/floor/round/trunc of an int is the int);
# PREDICATE is all-false on integers (an integer is never NaN or inf).
FLOAT, KEEP, IDENTITY, PREDICATE = "float", "keep", "identity", "predicate"


def _op(kind) -> Callable:
    return lambda ctx, x: unary(ctx, kind, x)


def _scaled_log(scale: float) -> Callable:
    return lambda ctx, x: binary(ctx, EW.PROD, unary(ctx, UN.LOG, x), scale, helpers.dtype_of(x))


# Note [log1p and expm1]
# log(1 + x) and exp(x) - 1 lose every digit of a tiny x (log1p(1e-7) in fp32 is off by
# 10%). Kahan's corrections recover them from the rounded u = 1 + x (u = exp(x)):
#   log1p(x) = x                    where u == 1, else log(u) * x / (u - 1)
#   expm1(x) = x                    where u == 1, else (u - 1) * x / log(u)
# and where u is inf the plain formula's inf is kept (the correction would be inf / inf).
def _corrected(ctx, x, u, plain, ratio):
    dtype = helpers.dtype_of(x)
    fixed = binary(ctx, EW.PROD, ratio, x, dtype)
    out = select(ctx, binary(ctx, EW.EQUAL, u, 1, dtype), x, fixed)
    return select(ctx, unary(ctx, UN.ISINF, u), plain, out)


def _expm1(ctx, x):
    dtype = helpers.dtype_of(x)
    u = unary(ctx, UN.EXP, x)
    plain = binary(ctx, EW.SUB, u, 1, dtype)
    ratio = binary(ctx, EW.DIV, plain, unary(ctx, UN.LOG, u), dtype)
    out = _corrected(ctx, x, u, plain, ratio)
    return select(ctx, binary(ctx, EW.EQUAL, plain, -1, dtype), plain, out)  # exp(x) == 0


def _log1p(ctx, x):
    dtype = helpers.dtype_of(x)
    u = binary(ctx, EW.SUM, x, 1, dtype)
    plain = unary(ctx, UN.LOG, u)
    ratio = binary(ctx, EW.DIV, plain, binary(ctx, EW.SUB, u, 1, dtype), dtype)
    out = _corrected(ctx, x, u, plain, ratio)
    return select(ctx, binary(ctx, EW.EQUAL, u, 0, dtype), plain, out)  # log1p(-1) = -inf


def _exp2(ctx, x):
    return unary(ctx, UN.EXP, binary(ctx, EW.PROD, x, math.log(2), helpers.dtype_of(x)))


def _rsqrt(ctx, x):
    return unary(ctx, UN.RECIP, unary(ctx, UN.SQRT, x))


def _erfc(ctx, x):
    return binary(ctx, EW.SUB, 1, unary(ctx, UN.ERF, x), helpers.dtype_of(x))


# overload -> (builder(ctx, x) on an ITensor of the compute dtype, integer policy, composite)
_UNARY: dict = {
    aten.exp.default: (_op(UN.EXP), FLOAT, False),
    aten.log.default: (_op(UN.LOG), FLOAT, False),
    aten.sqrt.default: (_op(UN.SQRT), FLOAT, False),
    aten.reciprocal.default: (_op(UN.RECIP), FLOAT, False),
    aten.sin.default: (_op(UN.SIN), FLOAT, False),
    aten.cos.default: (_op(UN.COS), FLOAT, False),
    aten.tan.default: (_op(UN.TAN), FLOAT, False),
    aten.sinh.default: (_op(UN.SINH), FLOAT, False),
    aten.cosh.default: (_op(UN.COSH), FLOAT, False),
    aten.asin.default: (_op(UN.ASIN), FLOAT, False),
    aten.acos.default: (_op(UN.ACOS), FLOAT, False),
    aten.atan.default: (_op(UN.ATAN), FLOAT, False),
    aten.asinh.default: (_op(UN.ASINH), FLOAT, False),
    aten.acosh.default: (_op(UN.ACOSH), FLOAT, False),
    aten.atanh.default: (_op(UN.ATANH), FLOAT, False),
    aten.erf.default: (_op(UN.ERF), FLOAT, False),
    aten.exp2.default: (_exp2, FLOAT, True),
    aten.expm1.default: (_expm1, FLOAT, True),
    aten.log1p.default: (_log1p, FLOAT, True),
    aten.log2.default: (_scaled_log(1 / math.log(2)), FLOAT, True),
    aten.log10.default: (_scaled_log(1 / math.log(10)), FLOAT, True),
    aten.rsqrt.default: (_rsqrt, FLOAT, True),
    aten.erfc.default: (_erfc, FLOAT, True),
    aten.abs.default: (_op(UN.ABS), KEEP, False),
    aten.neg.default: (_op(UN.NEG), KEEP, False),
    aten.sign.default: (_op(UN.SIGN), KEEP, False),
    aten.ceil.default: (_op(UN.CEIL), IDENTITY, False),
    aten.floor.default: (_op(UN.FLOOR), IDENTITY, False),
    aten.round.default: (_op(UN.ROUND), IDENTITY, False),
    aten.trunc.default: (trunc, IDENTITY, False),
    aten.isnan.default: (_op(UN.ISNAN), PREDICATE, False),
    aten.isinf.default: (_op(UN.ISINF), PREDICATE, False),
}


def _register_unary(target, build, policy, composite):
    @converter(target, dynamic=True, validator=plain_dtypes_ok)
    def convert(ctx, input):
        in_dtype = helpers.dtype_of(input)
        if not in_dtype.is_floating_point and policy in (IDENTITY, PREDICATE):
            if policy == IDENTITY:
                return input
            x = tensor(ctx, input, in_dtype)  # never NaN/inf: x != x is all false
            return unary(ctx, UN.NOT, binary(ctx, EW.EQUAL, x, x, in_dtype))
        dtype = ctx.out_dtype if policy != PREDICATE else in_dtype
        if dtype == torch.bool:
            dtype = torch.int32  # TensorRT's integer-capable unary ops reject bool
        return build(ctx, tensor(ctx, input, opmath(dtype) if composite else dtype))


for _target, _spec in _UNARY.items():
    _register_unary(_target, *_spec)


@converter(aten.signbit.default, dynamic=True, validator=plain_dtypes_ok)
def signbit(ctx, input):
    dtype = helpers.dtype_of(input)
    return is_negative(ctx, tensor(ctx, input, torch.int32 if dtype == torch.bool else dtype))


@converter(aten.round.decimals, dynamic=True, validator=plain_dtypes_ok)
def round_decimals(ctx, input, decimals):
    """round(x * 10^d) / 10^d (for d < 0: round(x / 10^-d) * 10^-d), as torch computes it."""
    dtype = ctx.out_dtype
    if not dtype.is_floating_point:
        return input
    compute = opmath(dtype)
    x = tensor(ctx, input, compute)
    scale = 10.0 ** abs(decimals)
    into, back = (EW.PROD, EW.DIV) if decimals >= 0 else (EW.DIV, EW.PROD)
    return binary(ctx, back, unary(ctx, UN.ROUND, binary(ctx, into, x, scale, compute)), scale,
                  compute)

