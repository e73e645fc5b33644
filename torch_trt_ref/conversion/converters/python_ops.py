"""Converters for Python-level graph ops: tuple indexing and SymInt arithmetic. A SymInt
is a Python int when it is static, else a 1-element int64 ITensor (SymFloat: float32,
SymBool: bool); operations on two Python values are folded in Python."""

from __future__ import annotations

import math
import operator

import torch

from .. import dims as D
from .. import helpers
from .._trt_ops import EW, UN
from ..registry import converter

aten = torch.ops.aten


@converter(operator.getitem, dynamic=True)
def getitem(ctx, sequence, index):
    return sequence[index]


@converter(aten.sym_size.int, dynamic=True, family="python_ops")
def sym_size(ctx, input, dim):
    return helpers.dim_size(ctx, input, dim)


@converter(aten.sym_numel.default, dynamic=True, family="python_ops")
def sym_numel(ctx, input):
    """The element count: the product of the sizes, a Python int when all are static."""
    total = 1
    for dim in range(len(input.shape)):
        size = helpers.dim_size(ctx, input, dim)
        total = (total * size if not helpers.is_tensor(total) and not helpers.is_tensor(size)
                 else _binary(ctx, EW.PROD, total, size, torch.int64))
    return total


def _operand(ctx, x, dtype: torch.dtype):
    """``x`` as a 1-element ITensor of ``dtype``."""
    x = helpers.itensor(ctx, x, dtype)
    return x if tuple(x.shape) == (1,) else D.reshape(ctx, x, [1])


def _binary(ctx, op, a, b, dtype: torch.dtype):
    a, b = _operand(ctx, a, dtype), _operand(ctx, b, dtype)
    return ctx.name_layer(ctx.net.add_elementwise(a, b, op), "sym").get_output(0)


def _kind(*values) -> torch.dtype:
    """int64 for SymInt arithmetic, float32 once a float (or SymFloat) is involved."""
    floating = any(isinstance(v, float) or (helpers.is_tensor(v) and helpers.dtype_of(v)
                                            .is_floating_point) for v in values)
    return torch.float32 if floating else torch.int64


def _floordiv(ctx, a, b):
    dtype = _kind(a, b)
    out = _binary(ctx, EW.FLOOR_DIV if dtype == torch.int64 else EW.DIV, a, b, dtype)
    return out if dtype == torch.int64 else helpers.unary(ctx, UN.FLOOR, out)


def _mod(ctx, a, b):
    """Python's modulo (result has the divisor's sign): a - floor(a / b) * b."""
    dtype = _kind(a, b)
    product = _binary(ctx, EW.PROD, _floordiv(ctx, a, b), b, dtype)
    return _binary(ctx, EW.SUB, a, product, dtype)


_ARITHMETIC = {  # Python function -> converter on (ctx, a, b) with at least one ITensor
    operator.add: lambda ctx, a, b: _binary(ctx, EW.SUM, a, b, _kind(a, b)),
    operator.sub: lambda ctx, a, b: _binary(ctx, EW.SUB, a, b, _kind(a, b)),
    operator.mul: lambda ctx, a, b: _binary(ctx, EW.PROD, a, b, _kind(a, b)),
    operator.truediv: lambda ctx, a, b: _binary(ctx, EW.DIV, a, b, torch.float32),
    operator.pow: lambda ctx, a, b: helpers.cast(
        ctx, _binary(ctx, EW.POW, a, b, torch.float32), _kind(a, b)),
    operator.floordiv: _floordiv,
    operator.mod: _mod,
    torch.sym_max: lambda ctx, a, b: _binary(ctx, EW.MAX, a, b, _kind(a, b)),
    torch.sym_min: lambda ctx, a, b: _binary(ctx, EW.MIN, a, b, _kind(a, b)),
    operator.eq: lambda ctx, a, b: _binary(ctx, EW.EQUAL, a, b, _kind(a, b)),
    operator.gt: lambda ctx, a, b: _binary(ctx, EW.GREATER, a, b, _kind(a, b)),
    operator.lt: lambda ctx, a, b: _binary(ctx, EW.LESS, a, b, _kind(a, b)),
    operator.ge: lambda ctx, a, b: _not(ctx, _binary(ctx, EW.LESS, a, b, _kind(a, b))),
    operator.le: lambda ctx, a, b: _not(ctx, _binary(ctx, EW.GREATER, a, b, _kind(a, b))),
    operator.ne: lambda ctx, a, b: _not(ctx, _binary(ctx, EW.EQUAL, a, b, _kind(a, b))),
}


def _not(ctx, x):
    return helpers.unary(ctx, UN.NOT, helpers.cast(ctx, x, torch.bool))


def _register_binary(target, emit):
    @converter(target, dynamic=True, family="python_ops")
    def convert(ctx, a, b):
        if not helpers.is_tensor(a) and not helpers.is_tensor(b):
            return target(a, b)
        return emit(ctx, a, b)


for _target, _emit in _ARITHMETIC.items():
    _register_binary(_target, _emit)


@converter(operator.neg, dynamic=True, family="python_ops")
def neg(ctx, a):
    return -a if not helpers.is_tensor(a) else _binary(ctx, EW.SUB, 0, a, _kind(a))


@converter(math.ceil, dynamic=True, family="python_ops")
def ceil(ctx, a):
    if not helpers.is_tensor(a):
        return math.ceil(a)
    if not helpers.dtype_of(a).is_floating_point:
        return a
    return helpers.cast(ctx, helpers.unary(ctx, UN.CEIL, a), torch.int64)


@converter(torch.sym_not, dynamic=True, family="python_ops")
def sym_not(ctx, a):
    """``not`` of a SymBool (a run-time bool tensor) or of a Python bool."""
    return (not a) if not helpers.is_tensor(a) else _not(ctx, a)
