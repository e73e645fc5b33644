"""Scatter converters along one dim: scatter (IScatterLayer ELEMENT), the reducing kinds
(scatter_add, scatter_reduce, index_reduce) as masked reductions over a one-hot axis,
slice_scatter and masked_scatter."""

from __future__ import annotations

import torch

from ..._trt import trt
from .. import dims as D
from .. import helpers
from .._trt_ops import EW, RED
from ..blocks.index import broadcast_dims, one_hot_axis, scatter_elements
from ..blocks.nodes import fake, node_args
from ..blocks.reduce import positions, reduce, where
from ..registry import converter

aten = torch.ops.aten



# The replacing kinds map to IScatterLayer ELEMENT; the reducing kinds are masked
# reductions over a one-hot axis inserted after ``dim``:
# mask[.., j, i, ..] = (index[.., j, ..] == i), contribution[.., i, ..] = reduce_j.

def _scatter_ok(node, settings):
    args = node_args(node)
    x, index = fake(args["input"]), fake(args["index"])
    if x.dim() == 0:
        return "scatter into a 0-d tensor is not supported"
    src = args.get("src")
    if isinstance(src, torch.fx.Node) and tuple(fake(src).shape) != tuple(index.shape):
        return "src must have the shape of index"
    return None


@converter(aten.scatter.src, validator=_scatter_ok, dynamic=True)
def scatter_src(ctx, input, dim, index, src):
    return scatter_elements(ctx, input, dim, index, src)


@converter(aten.scatter.value, validator=_scatter_ok, dynamic=True)
@D.itensor_input
def scatter_value(ctx, input, dim, index, value):
    index = helpers.itensor(ctx, index)
    return scatter_elements(ctx, input, dim, index, _filled_like(ctx, index, value, input))


def _filled_like(ctx, index, value, input):
    """A tensor of index's shape holding ``value`` in input's dtype."""
    fill = ctx.constant(torch.full([1] * len(index.shape), value,
                                   dtype=helpers.dtype_of(input)))
    return D.broadcast_to(ctx, fill, D.dims_of(ctx, index))


def _extreme(dtype: torch.dtype, largest: bool):
    if dtype.is_floating_point:
        return float("inf") if largest else float("-inf")
    info = torch.iinfo(dtype)
    return info.max if largest else info.min


# reduce name -> (IReduce op, neutral value for dtype, binary op that folds in self)
_SCATTER_REDUCE = {
    "sum": (RED.SUM, lambda t: 0, EW.SUM),
    "prod": (RED.PROD, lambda t: 1, EW.PROD),
    "amax": (RED.MAX, lambda t: _extreme(t, False), EW.MAX),
    "amin": (RED.MIN, lambda t: _extreme(t, True), EW.MIN),
    "mean": (RED.SUM, lambda t: 0, EW.SUM),
}


def _scatter_reduce_ok(node, settings):
    reason = _scatter_ok(node, settings)
    if reason:
        return reason
    args = node_args(node)
    x, index = fake(args["input"]), fake(args["index"])
    dim = args["dim"] % x.dim()
    if any(a != b for d, (a, b) in enumerate(zip(x.shape, index.shape)) if d != dim):
        return "index must match self in every dim but dim"
    reduce_name = args.get("reduce", "sum")
    if reduce_name == "mean" and not x.dtype.is_floating_point:
        return "integer scatter mean is not supported"
    return None


def scatter_reduce_impl(ctx, input, dim, index, src, reduce_name, include_self):
    dim = helpers.normalize_dim(dim, len(input.shape))
    dtype = helpers.dtype_of(input)
    op, neutral, fold = _SCATTER_REDUCE[reduce_name]
    src = helpers.itensor(ctx, src, dtype)
    n = D.dims_of(ctx, input)[dim]
    mask, src = one_hot_axis(ctx, helpers.itensor(ctx, index), src, n, dim)
    total = reduce(ctx, op, where(ctx, mask, src, neutral(dtype)), [dim], False)
    count = reduce(ctx, RED.SUM, helpers.cast(ctx, mask, torch.int32), [dim], False)
    if reduce_name == "mean":
        if include_self:
            total = helpers.elementwise(ctx, EW.SUM, total, input)
            count = helpers.elementwise(ctx, EW.SUM, count, 1)
        divisor = helpers.elementwise(ctx, EW.MAX, helpers.cast(ctx, count, dtype), 1.0)
        total = helpers.elementwise(ctx, EW.DIV, total, divisor)
        if include_self:
            return total
    elif include_self:
        return helpers.elementwise(ctx, fold, input, total)
    # without self, the elements no index points at keep their value
    return where(ctx, helpers.elementwise(ctx, EW.GREATER, count, 0), total, input)


@converter(aten.scatter_reduce.two, validator=_scatter_reduce_ok, dynamic=True)
@D.itensor_input
def scatter_reduce(ctx, input, dim, index, src, reduce, include_self=True):
    return scatter_reduce_impl(ctx, input, dim, index, src, reduce, include_self)


@converter(aten.scatter_add.default, validator=_scatter_reduce_ok, dynamic=True)
@D.itensor_input
def scatter_add(ctx, input, dim, index, src):
    return scatter_reduce_impl(ctx, input, dim, index, src, "sum", True)


@converter(aten.slice_scatter.default, dynamic=True)
@D.itensor_input
def slice_scatter(ctx, input, src, dim=0, start=None, end=None, step=1):
    """input with input[.., start:end:step, ..] = src, as an ELEMENT scatter whose index
    is start + step * i along ``dim``."""
    rank = len(input.shape)
    dim = helpers.normalize_dim(dim, rank)
    size = D.dims_of(ctx, input)[dim]
    start = 0 if start is None else start
    if not helpers.is_tensor(start) and start < 0:
        start = D.dim_op(ctx, "max", D.dim_op(ctx, "add", size, start), 0)
    src = helpers.itensor(ctx, src, helpers.dtype_of(input))
    src_dims = D.dims_of(ctx, src)
    index = positions(ctx, src, dim)
    if step != 1:
        index = helpers.elementwise(ctx, EW.PROD, index, step)
    if helpers.is_tensor(start) or start != 0:
        offset = D.reshape(ctx, D.as_dim(ctx, start), []) if helpers.is_tensor(start) \
            else start
        index = helpers.elementwise(ctx, EW.SUM, index, offset)
    index = D.broadcast_to(ctx, index, src_dims)
    layer = ctx.net.add_scatter(input, index, src, trt.ScatterMode.ELEMENT)
    layer.axis = dim
    return ctx.name_layer(layer, "slice_scatter").get_output(0)


def _index_reduce_ok(node, settings):
    args = node_args(node)
    x, source = fake(args["input"]), fake(args["source"])
    dim = args["dim"] % max(x.dim(), 1)
    if x.dim() == 0:
        return "index_reduce into a 0-d tensor is not supported"
    if any(a != b for d, (a, b) in enumerate(zip(x.shape, source.shape)) if d != dim):
        return "source must match self in every dim but dim"
    if args["reduce"] == "mean" and not x.dtype.is_floating_point:
        return "integer index_reduce mean is not supported"
    return None


@converter(aten.index_reduce.default, validator=_index_reduce_ok, dynamic=True)
@D.itensor_input
def index_reduce(ctx, input, dim, index, source, reduce, include_self=True):
    """out[.., index[j], ..] <reduce>= source[.., j, ..]: scatter_reduce with the 1-D
    index broadcast along the other dims of source."""
    source = helpers.itensor(ctx, source, helpers.dtype_of(input))
    dim = helpers.normalize_dim(dim, len(input.shape))
    sizes = D.dims_of(ctx, source)
    index = D.reshape(ctx, helpers.itensor(ctx, index), [1] * dim + [sizes[dim]] +
                      [1] * (len(sizes) - dim - 1))
    index = D.broadcast_to(ctx, index, sizes)
    return scatter_reduce_impl(ctx, input, dim, index, source, reduce, include_self)


@converter(aten.masked_scatter.default, dynamic=True)
@D.itensor_input
def masked_scatter(ctx, input, mask, source):
    """The k-th true element of mask (row-major) takes source.flatten()[k]: k is the
    running count of true elements, so one cumsum and one gather do it. input and mask
    broadcast against each other (the result has their broadcast shape)."""
    mask = helpers.itensor(ctx, mask)
    dims = broadcast_dims(ctx, [D.dims_of(ctx, input), D.dims_of(ctx, mask)])
    input, mask = D.broadcast_to(ctx, input, dims), D.broadcast_to(ctx, mask, dims)
    flat = D.reshape(ctx, helpers.cast(ctx, mask, torch.int32), [-1])
    axis = ctx.constant(torch.tensor(0, dtype=torch.int32))
    count = ctx.net.add_cumulative(flat, axis, trt.CumulativeOperation.SUM, True, False)
    before = ctx.name_layer(count, "count_true").get_output(0)  # exclusive: trues before
    source = D.reshape(ctx, helpers.itensor(ctx, source, helpers.dtype_of(input)), [-1])
    picked = D.reshape(ctx, _gather(ctx, source, before), dims)
    return where(ctx, mask, picked, input)


def _gather(ctx, data, indices):
    return ctx.name_layer(ctx.net.add_gather(data, indices, 0), "gather").get_output(0)


_LEGACY_REDUCE = {"add": "sum", "multiply": "prod"}  # scatter(..., reduce=) names


def _legacy_ok(node, settings):
    if node.kwargs.get("reduce") not in _LEGACY_REDUCE:
        return f"scatter reduce={node.kwargs.get('reduce')!r} is not supported"
    return _scatter_reduce_ok(node, settings)


@converter(aten.scatter.reduce, validator=_legacy_ok, dynamic=True)
@D.itensor_input
def scatter_src_reduce(ctx, input, dim, index, src, reduce):
    return scatter_reduce_impl(ctx, input, dim, index, src, _LEGACY_REDUCE[reduce], True)


@converter(aten.scatter.value_reduce, validator=_legacy_ok, dynamic=True)
@D.itensor_input
def scatter_value_reduce(ctx, input, dim, index, value, reduce):
    index = helpers.itensor(ctx, index)
    return scatter_reduce_impl(ctx, input, dim, index, _filled_like(ctx, index, value, input),
                               _LEGACY_REDUCE[reduce], True)
