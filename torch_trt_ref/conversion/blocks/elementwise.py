"""Elementwise building blocks on ITensors: constants and binary ops with torch's dtype
rules (``tensor``, ``binary``), ``select`` (where on ITensors of one dtype),
truthiness, sign, truncation and the two integer divisions, and ``opmath`` (the dtype a
composite computes in)."""

from __future__ import annotations

from typing import Any

import torch

from .. import helpers
from .._trt_ops import EW, UN
from ..helpers import unary

HALF = (torch.float16, torch.bfloat16)

# Note [Bool arithmetic]: torch allows add/mul/maximum/minimum on bool (logical or/and);
# TensorRT's arithmetic ops reject bool, its logical ops take only bool.
_BOOL_EQUIVALENT = {EW.SUM: EW.OR, EW.PROD: EW.AND, EW.MAX: EW.OR, EW.MIN: EW.AND}

def opmath(dtype: torch.dtype) -> torch.dtype:
    """The dtype a composite op computes in: float32 for half types, as torch's opmath
    does, so a chain of layers does not round after every step."""
    return torch.float32 if dtype in HALF else dtype

def tensor(ctx, x: Any, dtype: torch.dtype):
    """``x`` (ITensor, constant tensor or Python number) as an ITensor of ``dtype``."""
    if isinstance(x, (bool, int, float)):
        x = torch.tensor(x, dtype=dtype)
    return helpers.itensor(ctx, x, dtype)

def binary(ctx, op, a: Any, b: Any, dtype: torch.dtype):
    """``a <op> b`` computed in ``dtype`` with numpy broadcasting."""
    if dtype == torch.bool:
        op = _BOOL_EQUIVALENT.get(op, op)
    # Python numbers become constant tensors; helpers.elementwise gives constants their
    # broadcast rank before making layers (no extra shuffle).
    a, b = (torch.tensor(v, dtype=dtype) if is_scalar(v) else v for v in (a, b))
    return helpers.elementwise(ctx, op, a, b, dtype)

def select(ctx, condition, a, b):
    """``where(condition, a, b)`` for ITensors; a and b share a dtype, ranks broadcast."""
    rank = max(len(t.shape) for t in (condition, a, b))
    condition, a, b = (helpers.expand_rank(ctx, t, rank) for t in (condition, a, b))
    return ctx.name_layer(ctx.net.add_select(condition, a, b), "select").get_output(0)

def to_bool(ctx, x: Any):
    """torch's truthiness: nonzero (NaN included) is True."""
    if isinstance(x, (bool, int, float)):
        return tensor(ctx, bool(x), torch.bool)
    x = helpers.itensor(ctx, x)
    if helpers.dtype_of(x) == torch.bool:
        return x
    return unary(ctx, UN.NOT, binary(ctx, EW.EQUAL, x, 0, helpers.dtype_of(x)))

def is_negative(ctx, x):
    """Sign bit of ``x``: true for negative numbers, -0.0 and -inf (1/-0.0 is -inf)."""
    dtype = helpers.dtype_of(x)
    below = binary(ctx, EW.LESS, x, 0, dtype)
    if not dtype.is_floating_point:
        return below
    recip_below = binary(ctx, EW.LESS, unary(ctx, UN.RECIP, x), 0, dtype)
    return binary(ctx, EW.OR, below, recip_below, torch.bool)

def trunc(ctx, x):
    """Round a float ITensor toward zero (TensorRT has no TRUNC)."""
    negative = binary(ctx, EW.LESS, x, 0, helpers.dtype_of(x))
    return select(ctx, negative, unary(ctx, UN.CEIL, x), unary(ctx, UN.FLOOR, x))

def floor_divide(ctx, a, b, dtype):
    """Python's ``a // b`` (rounds toward -inf) for ints and floats."""
    return binary(ctx, EW.FLOOR_DIV, a, b, dtype)

def trunc_divide(ctx, a, b, dtype):
    """C's ``a / b`` (rounds toward zero). Note [Integer division]: the TensorRT docs do not
    state how DIV rounds integers, so ints use sign(a) * sign(b) * (|a| // |b|)."""
    if dtype.is_floating_point:
        return trunc(ctx, binary(ctx, EW.DIV, a, b, dtype))
    a, b = tensor(ctx, a, dtype), tensor(ctx, b, dtype)
    quotient = floor_divide(ctx, unary(ctx, UN.ABS, a), unary(ctx, UN.ABS, b), dtype)
    sign = binary(ctx, EW.PROD, unary(ctx, UN.SIGN, a), unary(ctx, UN.SIGN, b), dtype)
    return binary(ctx, EW.PROD, quotient, sign, dtype)

def is_scalar(x: Any) -> bool:
    return isinstance(x, (bool, int, float))
