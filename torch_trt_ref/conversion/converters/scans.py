"""Scan converters: cumsum (ICumulativeLayer) and, as log-step scans of slices and
elementwise layers over a static dim, cumprod, logcumsumexp and cummax/cummin."""

from __future__ import annotations

import torch

from ..._trt import trt
from .. import dims as D
from .. import helpers
from .._trt_ops import EW, UN
from ..blocks.nodes import fake, fake_input, floating_point_input_ok, node_args
from ..blocks.reduce import REDUCIBLE, positions, where
from ..registry import converter

aten = torch.ops.aten


def _scan_input(ctx, input, dim):
    """The scanned tensor in the output dtype (int sums widen to int64) and the dim."""
    out = ctx.out_dtype if isinstance(ctx.out_meta, torch.Tensor) else helpers.dtype_of(input)
    x = helpers.cast(ctx, input, out if out in REDUCIBLE else torch.int64)
    return x, helpers.normalize_dim(dim, max(len(x.shape), 1))


@converter(aten.cumsum.default, dynamic=True)
def cumsum(ctx, input, dim, dtype=None):
    x, dim = _scan_input(ctx, input, dim)
    if len(x.shape) == 0:
        return x
    axis = ctx.constant(torch.tensor(dim, dtype=torch.int32))
    layer = ctx.net.add_cumulative(x, axis, trt.CumulativeOperation.SUM, False, False)
    return ctx.name_layer(layer, "cumsum").get_output(0)


def _static_scan_axis_ok(node, settings):
    args = node_args(node)
    x, dim = fake(args["input"]), args["dim"]
    if x.dim() and not isinstance(x.shape[dim], int):
        return "the scanned dim must have a static size"
    return None


def scan(ctx, x, dim: int, combine, identity: float):
    """Inclusive scan by doubling (Hillis-Steele): after the step of size s every element
    has combined the 2s elements ending at it; reads before the start give ``identity``.
    ``combine(a, b)`` is an associative elementwise op or a callable(ctx, a, b)."""
    if not callable(combine):
        op = combine
        combine = lambda c, a, b: helpers.elementwise(c, op, a, b)  # noqa: E731
    n, rank, step = x.shape[dim], len(x.shape), 1
    while step < n:
        start = [0] * rank
        start[dim] = -step
        shifted = D.slice_nd(ctx, x, start, D.dims_of(ctx, x), [1] * rank,
                             mode=trt.SampleMode.FILL, fill=identity)
        x = combine(ctx, x, shifted)
        step *= 2
    return x


@converter(aten.cumprod.default, validator=_static_scan_axis_ok, dynamic=True)
def cumprod(ctx, input, dim, dtype=None):
    x, dim = _scan_input(ctx, input, dim)
    return x if len(x.shape) == 0 else scan(ctx, x, dim, EW.PROD, 1)


def _log_add_exp(ctx, a, b):
    """log(exp(a) + exp(b)) = max + log(1 + exp(-|a - b|)), exact in range."""
    top = helpers.elementwise(ctx, EW.MAX, a, b)
    gap = helpers.unary(ctx, UN.ABS, helpers.elementwise(ctx, EW.SUB, a, b))
    tail = helpers.unary(ctx, UN.EXP, helpers.unary(ctx, UN.NEG, gap))
    tail = helpers.unary(ctx, UN.LOG, helpers.elementwise(ctx, EW.SUM, tail, 1.0))
    return helpers.elementwise(ctx, EW.SUM, top, tail)


def _float_scan_ok(node, settings):
    return floating_point_input_ok(node, settings) or _static_scan_axis_ok(node, settings)


@converter(aten.logcumsumexp.default, validator=_float_scan_ok, dynamic=True)
def logcumsumexp(ctx, input, dim):
    x, dim = _scan_input(ctx, input, dim)
    return x if len(x.shape) == 0 else scan(ctx, x, dim, _log_add_exp, float("-inf"))


def _running_extreme(ctx, input, dim, op, largest: bool):
    """cummax/cummin: the running extreme and the LAST index where it occurs (torch's
    rule for ties): a scan of the positions where x equals the running extreme."""
    x, dim = _scan_input(ctx, input, dim)
    if len(x.shape) == 0:
        return x, ctx.constant(torch.tensor(0, dtype=torch.int64))
    dtype = helpers.dtype_of(x)
    if dtype.is_floating_point:
        identity = float("-inf") if largest else float("inf")
    else:
        identity = torch.iinfo(dtype).min if largest else torch.iinfo(dtype).max
    values = scan(ctx, x, dim, op, identity)
    hit = helpers.elementwise(ctx, EW.EQUAL, x, values)
    at = where(ctx, hit, positions(ctx, x, dim), -1)
    return values, scan(ctx, at, dim, EW.MAX, -1)


def _cum_extreme_ok(node, settings):
    if fake_input(node).dtype == torch.bool:
        return "bool inputs are not supported"
    return _static_scan_axis_ok(node, settings)


@converter(aten.cummax.default, validator=_cum_extreme_ok, dynamic=True)
def cummax(ctx, input, dim):
    return _running_extreme(ctx, input, dim, EW.MAX, True)


@converter(aten.cummin.default, validator=_cum_extreme_ok, dynamic=True)
def cummin(ctx, input, dim):
    return _running_extreme(ctx, input, dim, EW.MIN, False)
