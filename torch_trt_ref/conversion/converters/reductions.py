"""Reduction converters: the IReduceLayer family (sum, mean, prod, amax/amin, max/min, any),
first-index arg-reductions (argmax/argmin, max.dim/min.dim), variance, softmax and
log-softmax; plus the small building blocks (reduce, arange, where) other families use."""

from __future__ import annotations

import torch

from .. import dims as D
from .. import helpers
from .._trt_ops import EW, RED, UN
from ..blocks.nodes import fake_input, floating_point_input_ok
from ..blocks.reduce import REDUCIBLE, positions, reduce, reduce_dims, where
from ..registry import converter

aten = torch.ops.aten


# ---------------------------------------------------------------------------------------
# The IReduceLayer family: one table, one converter.

_REDUCTIONS = {
    aten.sum.dim_IntList: RED.SUM, aten.sum.default: RED.SUM,
    aten.mean.dim: RED.AVG, aten.mean.default: RED.AVG,
    aten.prod.default: RED.PROD, aten.prod.dim_int: RED.PROD,
    aten.amax.default: RED.MAX, aten.amin.default: RED.MIN,
    aten.max.default: RED.MAX, aten.min.default: RED.MIN,
    aten.any.default: RED.MAX, aten.any.dim: RED.MAX, aten.any.dims: RED.MAX,
}


def _register_reduction(target, op):
    @converter(target, dynamic=True)
    def convert(ctx, input, dim=None, keepdim=False, dtype=None):
        # The output dtype carries torch's rules: int sums and products accumulate in
        # int64, ``dtype=`` casts first, any() is bool. The reduction runs in that type.
        out = ctx.out_dtype
        x = helpers.cast(ctx, input, torch.bool) if out == torch.bool else input
        x = helpers.cast(ctx, x, out if out in REDUCIBLE else torch.int32)
        if target == aten.any.dims and dim is not None and len(dim) == 0:
            return x  # unlike sum and amax, any(dim=[]) reduces nothing
        return reduce(ctx, op, x, reduce_dims(dim, len(x.shape)), keepdim)


for _target, _op in _REDUCTIONS.items():
    _register_reduction(_target, _op)


# ---------------------------------------------------------------------------------------
# Arg-reductions: torch returns the FIRST index of the extreme value (NaN counts as the
# extreme), which TopK does not promise; so: extreme -> equality mask -> min position.

def _arg_ok(node, settings):
    dtype = fake_input(node).dtype
    if dtype not in REDUCIBLE:
        return f"arg-reductions of {dtype} tensors are not supported"
    return None


def first_index(ctx, x, dim: int, extreme, keepdim: bool):
    """Index of the first element along ``dim`` that equals ``extreme`` (or is NaN)."""
    hit = helpers.elementwise(ctx, EW.EQUAL, x, extreme)
    if helpers.dtype_of(x).is_floating_point:
        hit = helpers.elementwise(ctx, EW.OR, hit, helpers.unary(ctx, UN.ISNAN, x))
    candidates = where(ctx, hit, positions(ctx, x, dim), 2**62)
    return reduce(ctx, RED.MIN, candidates, [dim], keepdim)


def _extreme_and_index(ctx, x, dim, keepdim, op):
    rank = len(x.shape)
    if dim is None:
        x, dim = D.reshape(ctx, x, [-1]), 0
    else:
        dim = helpers.normalize_dim(dim, rank)
        if rank == 0:
            x = D.reshape(ctx, x, [1])
    extreme = reduce(ctx, op, x, [dim], True)
    index = first_index(ctx, x, dim, extreme, keepdim)
    if not keepdim:
        extreme = reduce(ctx, op, x, [dim], False)
    if rank == 0 or (keepdim and len(x.shape) != rank):
        index = D.reshape(ctx, index, [1] * rank)
        extreme = D.reshape(ctx, extreme, [1] * rank)
    return extreme, index


@converter(aten.argmax.default, validator=_arg_ok, dynamic=True)
def argmax(ctx, input, dim=None, keepdim=False):
    return _extreme_and_index(ctx, input, dim, keepdim, RED.MAX)[1]


@converter(aten.argmin.default, validator=_arg_ok, dynamic=True)
def argmin(ctx, input, dim=None, keepdim=False):
    return _extreme_and_index(ctx, input, dim, keepdim, RED.MIN)[1]


@converter(aten.max.dim, validator=_arg_ok, dynamic=True)
def max_dim(ctx, input, dim, keepdim=False):
    return _extreme_and_index(ctx, input, dim, keepdim, RED.MAX)


@converter(aten.min.dim, validator=_arg_ok, dynamic=True)
def min_dim(ctx, input, dim, keepdim=False):
    return _extreme_and_index(ctx, input, dim, keepdim, RED.MIN)


# ---------------------------------------------------------------------------------------
# Variance: sum((x - mean)^2) / max(N - correction, 0), N = number of reduced elements.


def _variance(ctx, x, dims, correction, keepdim):
    mean = reduce(ctx, RED.AVG, x, dims, True)
    centered = helpers.elementwise(ctx, EW.SUB, x, mean)
    squares = helpers.elementwise(ctx, EW.PROD, centered, centered)
    total = reduce(ctx, RED.SUM, squares, dims, keepdim)
    sizes = D.dims_of(ctx, x)
    count: D.Dim = 1
    for d in dims:
        count = D.dim_op(ctx, "mul", count, sizes[d])
    correction = 1 if correction is None else correction
    if helpers.is_tensor(count):
        count = helpers.cast(ctx, count, helpers.dtype_of(x))
        denom = helpers.elementwise(ctx, EW.SUB, count, float(correction))
        denom = helpers.elementwise(ctx, EW.MAX, denom, 0.0)
        denom = D.reshape(ctx, denom, [])
    else:
        denom = max(count - correction, 0)
    return helpers.elementwise(ctx, EW.DIV, total, float(denom) if not helpers.is_tensor(
        denom) else denom)


@converter(aten.var.correction, validator=floating_point_input_ok, dynamic=True)
def var(ctx, input, dim=None, correction=None, keepdim=False):
    return _variance(ctx, input, reduce_dims(dim, len(input.shape)), correction, keepdim)


@converter(aten.var_mean.correction, validator=floating_point_input_ok, dynamic=True)
def var_mean(ctx, input, dim=None, correction=None, keepdim=False):
    dims = reduce_dims(dim, len(input.shape))
    return (_variance(ctx, input, dims, correction, keepdim),
            reduce(ctx, RED.AVG, input, dims, keepdim))


# ---------------------------------------------------------------------------------------
# Softmax family.

# Note [softmax rank]
# TensorRT's ISoftMaxLayer cannot infer the shape of a rank-1 input ("Could not get tensor
# shape"); 0-d and rank-1 inputs go through as a (1, n) matrix.

@converter(aten._softmax.default, validator=floating_point_input_ok, dynamic=True)
def softmax(ctx, input, dim, half_to_float=False):
    x = helpers.cast(ctx, input, ctx.out_dtype)
    rank = len(x.shape)
    axis = helpers.normalize_dim(dim, rank) if rank else 0
    if rank < 2:
        x, axis = D.reshape(ctx, x, [1, -1]), 1
    layer = ctx.net.add_softmax(x)
    layer.axes = 1 << axis
    out = ctx.name_layer(layer, "softmax").get_output(0)
    return D.reshape(ctx, out, [-1] * rank) if rank < 2 else out


@converter(aten._log_softmax.default, validator=floating_point_input_ok, dynamic=True)
def log_softmax(ctx, input, dim, half_to_float=False):
    """x - max - log(sum(exp(x - max))): no overflow, and no log(0) for tiny softmax."""
    x = helpers.cast(ctx, input, ctx.out_dtype)
    dims = [helpers.normalize_dim(dim, len(x.shape))]
    shifted = helpers.elementwise(ctx, EW.SUB, x, reduce(ctx, RED.MAX, x, dims, True))
    total = reduce(ctx, RED.SUM, helpers.unary(ctx, UN.EXP, shifted), dims, True)
    return helpers.elementwise(ctx, EW.SUB, shifted, helpers.unary(ctx, UN.LOG, total))
