"""Pooling converters: max/avg pooling (2d/3d, padding, ceil_mode, count_include_pad,
divisor_override) onto IPoolingLayer, and adaptive avg/max pooling."""

from __future__ import annotations

import math
from typing import Optional

import torch

from ..._trt import trt
from .. import helpers
from .._trt_ops import EW, RED, UN
from ..args import per_dim, pool_params
from ..blocks.nodes import extra_outputs_used, fake_input, float_only, node_args
from ..blocks.shape import MODE, add_leading_one, drop_dim, index_vector, pad_slice
from ..registry import converter

aten = torch.ops.aten
POOL = trt.PoolingType

# Note [ceil_mode]: ATen's ceil_mode size is floor((n + 2p - k + s - 1) / s) + 1, minus one
# when that last window would start at or past n + p (in the right padding), that is
# min(floor((n + 2p - k + s - 1) / s), floor((n + p - 1) / s)) + 1. TensorRT's
# EXPLICIT_ROUND_DOWN size is floor((n + pre + post - k) / s) + 1, and TensorRT wants
# padding smaller than the window. A post padding of p + extra gives ATen's size:
#   static n:  extra = (out - 1) * s + k - (n + 2p) when positive (the last window's
#              overhang past n + p; at most k - 1 - p since that window starts before n)
#   dynamic n: extra = min(s - 1, k - 1 - p), for every n at once (floor is monotonic, so
#              floor((X + min(a, b)) / s) = min(floor((X + a) / s), floor((X + b) / s)))
# Max pooling ignores padding. ATen's average divides by the window's overlap with
# [-p, n + p) (count_include_pad) or with [0, n). The latter is TensorRT's
# average_count_excludes_padding. For the former TensorRT's full window is right until a
# window reaches past n + p; then (extra > 0) the declared padding becomes real zeros and
# the remaining (extra) padding is excluded. divisor_override D scales TensorRT's
# full-window average (sum / kernel area: ROUND_DOWN windows stay inside the padded
# input) by area / D.


def _geometry(args: dict, nd: int):
    """(kernel, stride, padding) lists of length nd from aten pooling arguments, expanded
    as ATen does (Note [ATen int lists])."""
    p = pool_params(args["kernel_size"], args.get("stride"), args.get("padding", 0),
                    args.get("dilation", 1), nd)
    return p["kernel"], p["stride"], p["padding"]


def _ceil_extra(spatial, kernel, stride, padding, ceil_mode: bool) -> list[int]:
    """Extra post padding per dim for ceil_mode (Note [ceil_mode])."""
    if not ceil_mode:
        return [0] * len(kernel)
    extra = []
    for n, k, s, p in zip(spatial, kernel, stride, padding):
        if not isinstance(n, int) or n < 0:
            extra.append(min(s - 1, k - 1 - p))
            continue
        out = -(-(n + 2 * p - k) // s) + 1
        if (out - 1) * s >= n + p:
            out -= 1
        extra.append(max(0, (out - 1) * s + k - n - 2 * p))
    return extra


def _common_reason(node, nd: int, what: str) -> Optional[str]:
    reason = float_only(node, what)
    if reason:
        return reason
    x = fake_input(node)
    if x.dim() not in (nd + 1, nd + 2):
        return f"{what} expects a {nd + 1}-d or {nd + 2}-d input"
    return None


def _max_ok(nd: int):
    def validate(node, settings) -> Optional[str]:
        reason = _common_reason(node, nd, "max pooling")
        if reason:
            return reason
        args = node_args(node)
        try:
            _geometry(args, nd)
        except ValueError as err:
            return f"max pooling arguments: {err}"
        if any(d != 1 for d in per_dim(args["dilation"], nd, "dilation")):
            return "TensorRT pooling has no dilation"
        if extra_outputs_used(node):
            return "the indices output of max pooling is not supported"
        return None

    return validate


def _avg_ok(nd: int):
    def validate(node, settings) -> Optional[str]:
        reason = _common_reason(node, nd, "average pooling")
        if reason:
            return reason
        try:
            _geometry(node_args(node), nd)
        except ValueError as err:
            return f"average pooling arguments: {err}"
        return None

    return validate


def _pool(ctx, x, kind, kernel, stride, pre, post, exclude_padding=False):
    """IPoolingLayer over the last len(kernel) dims; an unbatched input gets a unit batch.
    TensorRT pools over 2 or 3 dims: a 1-d pool is a 2-d one over (1, L)."""
    nd = len(kernel)
    if nd == 1:
        lifted = helpers.unsqueeze(ctx, x, len(x.shape) - 1)
        out = _pool(ctx, lifted, kind, [1, *kernel], [1, *stride], [0, *pre], [0, *post],
                    exclude_padding)
        return drop_dim(ctx, out, len(out.shape) - 2)
    unbatched = len(x.shape) == nd + 1
    if unbatched:
        x = add_leading_one(ctx, x)
    layer = ctx.net.add_pooling_nd(x, kind, kernel)
    layer.stride_nd = stride
    layer.pre_padding = pre
    layer.post_padding = post
    if kind == POOL.AVERAGE:
        layer.average_count_excludes_padding = exclude_padding
    out = ctx.name_layer(layer, "pooling").get_output(0)
    return drop_dim(ctx, out, 0) if unbatched else out


def _register_max(target, nd: int, with_indices: bool = True):
    """``max_pool{n}d_with_indices`` (values, indices unsupported) or the composite
    ``max_pool{n}d`` (values only), kept when the user disables its decomposition."""
    @converter(target, validator=_max_ok(nd), dynamic=True, family="pooling")
    def max_pool(ctx, input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        args = {"kernel_size": kernel_size, "stride": stride, "padding": padding}
        kernel, stride, padding = _geometry(args, nd)
        extra = _ceil_extra(input.shape[-nd:], kernel, stride, padding, ceil_mode)
        post = [p + e for p, e in zip(padding, extra)]
        out = _pool(ctx, input, POOL.MAX, kernel, stride, padding, post)
        return (out, None) if with_indices else out


def _register_avg(target, nd: int):
    @converter(target, validator=_avg_ok(nd), dynamic=True, family="pooling")
    def avg_pool(ctx, input, kernel_size, stride=(), padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        args = {"kernel_size": kernel_size, "stride": stride, "padding": padding}
        kernel, stride, padding = _geometry(args, nd)
        extra = _ceil_extra(input.shape[-nd:], kernel, stride, padding, ceil_mode)
        pre, x, exclude = padding, input, not count_include_pad
        if divisor_override:  # (avg_pool1d has none) Note [ceil_mode]
            exclude = False
        elif count_include_pad and any(extra):
            if any(padding):  # real zeros, counted; TensorRT's extra padding is not
                x = pad_slice(ctx, input, [q for p in reversed(padding) for q in (p, p)],
                              MODE.FILL, fill=0.0)
                pre = [0] * nd
            exclude = True
        post = [p + e for p, e in zip(pre, extra)]
        out = _pool(ctx, x, POOL.AVERAGE, kernel, stride, pre, post, exclude)
        if divisor_override:
            scale = math.prod(kernel) / divisor_override
            out = helpers.elementwise(ctx, EW.PROD, out, scale, helpers.dtype_of(out))
        return out


_register_max(aten.max_pool2d_with_indices.default, 2)
_register_max(aten.max_pool3d_with_indices.default, 3)
_register_avg(aten.avg_pool2d.default, 2)
_register_avg(aten.avg_pool3d.default, 3)
# Composites the default lowering decomposes (max_pool2d -> max_pool2d_with_indices,
# avg_pool1d -> avg_pool2d, ...): these serve graphs that keep them
# (disabled_decompositions), as Torch-TensorRT converts them.
for _nd, _target in enumerate((aten.max_pool1d.default, aten.max_pool2d.default,
                               aten.max_pool3d.default), start=1):
    _register_max(_target, _nd, with_indices=False)
_register_avg(aten.avg_pool1d.default, 1)


# ---------------------------------------------------------------------------------------
# Adaptive pooling. Output cell i of a dim of size n -> m covers input
# [floor(i * n / m), ceil((i + 1) * n / m)). When m divides n that is a plain pooling
# window; otherwise each dim is pooled separately (average and max over a box are
# separable): a static n gathers the windows, padded to equal length, and reduces them;
# a dynamic n masks an (m, n) grid of "j is in window i" computed from the runtime size.


def _adaptive_ok(nd: int, what: str):
    def validate(node, settings) -> Optional[str]:
        reason = _common_reason(node, nd, what)
        if reason:
            return reason
        if extra_outputs_used(node):
            return f"the indices output of {what} is not supported"
        try:
            output_size = per_dim(node_args(node)["output_size"], nd, "output_size")
        except ValueError as err:
            return f"{what} arguments: {err}"
        if not all(isinstance(d, int) for d in output_size):
            return f"{what} needs a static output_size"
        return None

    return validate


def _windows(n: int, m: int) -> list[tuple[int, int]]:
    return [(i * n // m, -(-(i + 1) * n // m)) for i in range(m)]


def _adaptive_dim(ctx, x, axis: int, m: int, average: bool):
    """Pool dim ``axis`` of ``x`` from its size to ``m`` cells."""
    windows = _windows(x.shape[axis], m)
    width = max(end - start for start, end in windows)
    index = torch.tensor([[min(start + j, end - 1) for j in range(width)]
                          for start, end in windows], dtype=torch.int32)
    gathered = ctx.net.add_gather(x, helpers.itensor(ctx, index), axis)
    out = ctx.name_layer(gathered, "adaptive_windows").get_output(0)
    op = RED.MAX
    if average:
        weights = torch.tensor([[1.0 / (end - start) if start + j < end else 0.0
                                 for j in range(width)] for start, end in windows])
        trailing = len(x.shape) - axis - 1
        weights = weights.reshape(weights.shape + (1,) * trailing)
        out = helpers.elementwise(ctx, EW.PROD, out, weights, helpers.dtype_of(x))
        op = RED.SUM
    reduce = ctx.net.add_reduce(out, op, 1 << (axis + 1), False)
    return ctx.name_layer(reduce, "adaptive_reduce").get_output(0)


def _window_mask(ctx, n, m: int):
    """(m, n) bool: input j lies in window i = [floor(i n / m), floor(((i + 1) n + m - 1) / m))
    for a runtime size ``n`` (1-element int64 ITensor); and the (m, 1) window lengths."""
    i = torch.arange(m, dtype=torch.int64).reshape(m, 1)
    start = helpers.elementwise(ctx, EW.FLOOR_DIV, helpers.elementwise(ctx, EW.PROD, i, n),
                                m, torch.int64)
    end = helpers.elementwise(ctx, EW.PROD, i + 1, n)
    end = helpers.elementwise(ctx, EW.FLOOR_DIV, helpers.elementwise(
        ctx, EW.SUM, end, m - 1, torch.int64), m, torch.int64)
    j = helpers.reshape(ctx, index_vector(ctx, n), [1, n])
    before = helpers.elementwise(ctx, EW.LESS, j, start, torch.int64)
    inside = helpers.elementwise(ctx, EW.LESS, j, end, torch.int64)
    mask = ctx.net.add_elementwise(helpers.unary(ctx, UN.NOT, before), inside, EW.AND)
    length = helpers.elementwise(ctx, EW.SUB, end, start, torch.int64)
    return ctx.name_layer(mask, "window_mask").get_output(0), length


def _adaptive_dim_dynamic(ctx, x, axis: int, m: int, average: bool):
    """Pool dim ``axis`` of ``x`` (dynamic size) to ``m`` cells through a window mask."""
    rank, dtype = len(x.shape), helpers.dtype_of(x)
    mask, length = _window_mask(ctx, helpers.dim_size(ctx, x, axis), m)
    if axis < rank - 1:
        mask = helpers.insert_ones(ctx, mask, 2, rank - axis - 1)
    mask = helpers.expand_rank(ctx, mask, rank + 1)
    work = torch.float32 if average else dtype  # sums accumulate in fp32
    values = helpers.unsqueeze(ctx, helpers.cast(ctx, x, work), axis)
    empty = 0.0 if average else -math.inf
    fill = helpers.itensor(ctx, torch.full((1,) * (rank + 1), empty, dtype=work))
    picked = ctx.name_layer(ctx.net.add_select(mask, values, fill), "windows").get_output(0)
    reduce = ctx.net.add_reduce(picked, RED.SUM if average else RED.MAX, 1 << (axis + 1),
                                False)
    out = ctx.name_layer(reduce, "adaptive_reduce").get_output(0)
    if average:
        count = helpers.reshape(ctx, helpers.cast(ctx, length, work), [m] + [1] * (
            rank - axis - 1))
        out = helpers.cast(ctx, helpers.elementwise(ctx, EW.DIV, out, count, work), dtype)
    return out


def _adaptive(ctx, x, output_size, average: bool):
    nd = len(output_size)
    spatial = list(x.shape[-nd:])
    if all(n >= 0 and n % m == 0 for n, m in zip(spatial, output_size)):
        kernel = [n // m for n, m in zip(spatial, output_size)]
        kind = POOL.AVERAGE if average else POOL.MAX
        return _pool(ctx, x, kind, kernel, kernel, [0] * nd, [0] * nd)
    rank = len(x.shape)
    for i, (n, m) in enumerate(zip(spatial, output_size)):
        if n < 0:
            x = _adaptive_dim_dynamic(ctx, x, rank - nd + i, m, average)
        elif n != m:
            x = _adaptive_dim(ctx, x, rank - nd + i, m, average)
    return x


def _register_adaptive(target, nd: int, average: bool):
    what = f"adaptive {'average' if average else 'max'} pooling"

    @converter(target, validator=_adaptive_ok(nd, what), dynamic=True,
               family="pooling")
    def adaptive_pool(ctx, input, output_size):
        out = _adaptive(ctx, input, per_dim(output_size, nd, "output_size"), average)
        return out if average else (out, None)


_register_adaptive(aten.adaptive_avg_pool1d.default, 1, True)
_register_adaptive(aten.adaptive_avg_pool2d.default, 2, True)
_register_adaptive(aten.adaptive_avg_pool3d.default, 3, True)
_register_adaptive(aten._adaptive_avg_pool2d.default, 2, True)
_register_adaptive(aten._adaptive_avg_pool3d.default, 3, True)
_register_adaptive(aten.adaptive_max_pool2d.default, 2, False)
_register_adaptive(aten.adaptive_max_pool3d.default, 3, False)
