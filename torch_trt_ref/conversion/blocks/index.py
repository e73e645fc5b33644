"""Index building blocks: ``gather`` (empty indices too), ``wrap_negative_indices`` (torch's
negative indices), ``broadcast_dims``, ``scatter_elements`` and ``scatter_reduce_sum`` (a
masked sum over a one-hot axis), ``filled`` (a constant of runtime shape) and
``topk_layer``."""

from __future__ import annotations

import torch

from ..._trt import trt
from .. import dims as D
from .. import helpers
from .._trt_ops import EW, RED
from .reduce import arange, reduce, where


def _gather_shape(data, indices, axis: int, mode) -> list[int]:
    if mode == trt.GatherMode.ELEMENT:
        return list(indices.shape)
    return list(data.shape[:axis]) + list(indices.shape) + list(data.shape[axis + 1:])

def gather(ctx, data, indices, axis: int, mode=None):
    """A GatherLayer; empty ``indices`` give an empty slice of ``data`` instead (TensorRT
    cannot infer the shape of a gather with no indices)."""
    if mode in (None, trt.GatherMode.ELEMENT) and 0 in tuple(indices.shape):
        shape = _gather_shape(data, indices, axis, mode)
        if all(d >= 0 for d in shape) and all(d >= 0 for d in data.shape):
            rank = len(data.shape)
            empty = D.slice_nd(ctx, data, [0] * rank, [0] * rank, [1] * rank)
            return D.reshape(ctx, empty, shape)
    layer = ctx.net.add_gather(data, indices, axis)
    if mode is not None:
        layer.mode = mode
    return ctx.name_layer(layer, "gather").get_output(0)

def wrap_negative_indices(ctx, index, size: D.Dim):
    """torch's negative indices count from the end: index + size where index < 0."""
    if isinstance(index, torch.Tensor):
        if not helpers.is_tensor(size):
            return ctx.constant(torch.where(index < 0, index + size, index).long())
        index = ctx.constant(index.long())
    index = helpers.cast(ctx, index, torch.int64)
    negative = helpers.elementwise(ctx, EW.LESS, index, 0)
    shifted = helpers.elementwise(ctx, EW.SUM, index, D.reshape(ctx, D.as_dim(
        ctx, size), []) if helpers.is_tensor(size) else size)
    return where(ctx, negative, shifted, index)

def broadcast_dims(ctx, shapes: list[list[D.Dim]]) -> list[D.Dim]:
    """numpy broadcasting of several shapes (dynamic dims: the max, as sizes are 1 or n)."""
    rank = max(len(s) for s in shapes)
    out: list[D.Dim] = []
    for i in range(rank):
        dim: D.Dim = 1
        for shape in shapes:
            d = ([1] * (rank - len(shape)) + list(shape))[i]
            if not helpers.is_tensor(d) and d == 1:
                continue
            dim = d if not helpers.is_tensor(dim) and dim == 1 else D.dim_op(ctx, "max", dim, d)
        out.append(dim)
    return out

def one_hot_axis(ctx, index, src, n: D.Dim, dim: int):
    """(mask, src) with a one-hot axis of size n inserted after ``dim``."""
    index = helpers.unsqueeze(ctx, helpers.cast(ctx, index, torch.int64), dim + 1)
    rank = len(index.shape)
    hot = D.reshape(ctx, arange(ctx, n), [1] * (dim + 1) + [n] + [1] * (rank - dim - 2))
    mask = helpers.elementwise(ctx, EW.EQUAL, index, hot)
    return mask, helpers.unsqueeze(ctx, src, dim + 1)

def scatter_reduce_sum(ctx, index, src, n: D.Dim, dim: int):
    mask, src = one_hot_axis(ctx, index, src, n, dim)
    return reduce(ctx, RED.SUM, where(ctx, mask, src, 0), [dim], False)

def filled(ctx, dims, value, dtype: torch.dtype):
    """A tensor of shape ``dims`` holding ``value`` (a Python scalar or a 1-element
    ITensor): a constant of shape [1] * rank broadcast by a stride-0 slice."""
    dims = [D.as_dim(ctx, d) for d in dims]
    ones = [1] * len(dims)
    if helpers.is_tensor(value):
        scalar = D.reshape(ctx, helpers.cast(ctx, value, dtype), ones)
    else:
        scalar = ctx.constant(torch.full(ones, value, dtype=dtype))
    return D.broadcast_to(ctx, scalar, dims)

MAX_K = 3840

def topk_layer(ctx, x, k: D.Dim, dim: int, largest: bool):
    """(values, int64 indices) of the k largest/smallest along ``dim``, sorted. TopK
    needs rank >= 2: a 1-D input is viewed as [1, n]."""
    if len(x.shape) == 1:
        values, indices = topk_layer(ctx, D.reshape(ctx, x, [1, -1]), k, 1, largest)
        return tuple(D.reshape(ctx, t, [-1]) for t in (values, indices))
    op = trt.TopKOperation.MAX if largest else trt.TopKOperation.MIN
    if helpers.is_tensor(k):  # a run-time k: made before the layer, layers run in order
        k_tensor, k = D.reshape(ctx, helpers.cast(ctx, k, torch.int32), []), 1
    layer = ctx.net.add_topk(x, op, k, 1 << dim, trt.int64)
    if k == 1 and "k_tensor" in locals():
        layer.set_input(1, k_tensor)
    ctx.name_layer(layer, "topk")
    return layer.get_output(0), layer.get_output(1)


@D.itensor_input
def scatter_elements(ctx, input, dim, index, src):
    """torch.scatter(input, dim, index, src) with ``src`` of index's shape (IScatterLayer
    ELEMENT)."""
    src = helpers.itensor(ctx, src, helpers.dtype_of(input))
    layer = ctx.net.add_scatter(input, helpers.itensor(ctx, index), src,
                                trt.ScatterMode.ELEMENT)
    layer.axis = helpers.normalize_dim(dim, len(input.shape))
    return ctx.name_layer(layer, "scatter").get_output(0)
