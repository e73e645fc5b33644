"""Converters that cut or repeat tensors along dims: slice, select, split, unbind, narrow,
flip, repeat, roll, diagonal, unfold and as_strided. Most are one ISliceLayer (strides,
negative strides, WRAP mode); unfold and as_strided are gathers."""

from __future__ import annotations

import torch

from ..._trt import trt
from .. import dims as D
from .. import helpers
from ..blocks.nodes import fake, fake_input, node_args
from ..blocks.shape import INT64_MAX, repeat_tensor, slice_bound, slice_dim
from ..registry import converter

aten = torch.ops.aten


@converter(aten.slice.Tensor, aten.slice_copy.Tensor, dynamic=True)
@D.itensor_input
def slice_(ctx, input, dim=0, start=None, end=None, step=1):
    if len(input.shape) == 0:
        return input
    dim = helpers.normalize_dim(dim, len(input.shape))
    size = D.dims_of(ctx, input)[dim]
    begin, stop = slice_bound(ctx, start, size, 0), slice_bound(ctx, end, size, INT64_MAX)
    span = D.dim_op(ctx, "add", D.dim_op(ctx, "sub", stop, begin), step - 1)
    length = D.dim_op(ctx, "max", D.dim_op(ctx, "floordiv", span, step), 0)
    return slice_dim(ctx, input, dim, begin, length, step)


@converter(aten.narrow_copy.default, dynamic=True)
@D.itensor_input
def narrow_copy(ctx, input, dim, start, length):
    dim = helpers.normalize_dim(dim, len(input.shape))
    start = D.wrap_negative_dim(ctx, start, D.dims_of(ctx, input)[dim])
    return slice_dim(ctx, input, dim, D.as_dim(ctx, start), D.as_dim(ctx, length))


@converter(aten.select.int, aten.select_copy.int, dynamic=True)
@D.itensor_input
def select(ctx, input, dim, index):
    dim = helpers.normalize_dim(dim, len(input.shape))
    if helpers.is_tensor(index) or index < 0:
        index = D.wrap_negative_dim(ctx, index, D.dims_of(ctx, input)[dim])
    if helpers.is_tensor(index):
        index = D.reshape(ctx, D.as_dim(ctx, index), [])
    else:
        index = ctx.constant(torch.tensor(index, dtype=torch.int64))
    return ctx.name_layer(ctx.net.add_gather(input, index, dim), "select").get_output(0)


@converter(aten.split_with_sizes.default, dynamic=True)
@D.itensor_input
def split_with_sizes(ctx, input, split_sizes, dim=0):
    dim = helpers.normalize_dim(dim, len(input.shape))
    outputs, start = [], 0
    for size in split_sizes:
        size = D.as_dim(ctx, size)
        outputs.append(slice_dim(ctx, input, dim, start, size))
        start = D.dim_op(ctx, "add", start, size)
    return outputs


@converter(aten.split_copy.Tensor, dynamic=True)
@D.itensor_input
def split_copy(ctx, input, split_size, dim=0):
    dim = helpers.normalize_dim(dim, len(input.shape))
    count = len(ctx.out_meta)
    last = D.dim_op(ctx, "sub", D.dims_of(ctx, input)[dim],
                    D.dim_op(ctx, "mul", split_size, count - 1))
    return split_with_sizes(ctx, input, [split_size] * (count - 1) + [last], dim)


@converter(aten.unbind_copy.int, dynamic=True)
@D.itensor_input
def unbind_copy(ctx, input, dim=0):
    return [select(ctx, input, dim, i) for i in range(len(ctx.out_meta))]


@converter(aten.flip.default, dynamic=True)
@D.itensor_input
def flip(ctx, input, dims):
    rank = len(input.shape)
    flipped = {helpers.normalize_dim(d, rank) for d in dims}
    sizes = D.dims_of(ctx, input)
    # an empty dim starts at 0, not -1 (TensorRT rejects negative starts)
    start = [D.dim_op(ctx, "max", D.dim_op(ctx, "sub", s, 1), 0) if i in flipped else 0
             for i, s in enumerate(sizes)]
    stride = [-1 if i in flipped else 1 for i in range(rank)]
    return D.slice_nd(ctx, input, start, sizes, stride)


@converter(aten.repeat.default, dynamic=True)
def repeat(ctx, input, repeats):
    return repeat_tensor(ctx, input, repeats)


def _unfold_ok(node, settings):
    args = node_args(node)
    val = fake(args["input"])
    if val.dim() == 0:
        return "unfold of a 0-d tensor is not supported"
    if not isinstance(val.shape[args["dimension"] % val.dim()], int):
        return "the unfolded dim must be static"
    return None


@converter(aten.diagonal.default, dynamic=True)
@D.itensor_input
def diagonal(ctx, input, offset=0, dim1=0, dim2=1):
    """Move dim1, dim2 last, flatten them and take every (m+1)-th element."""
    rank = len(input.shape)
    d1, d2 = helpers.normalize_dim(dim1, rank), helpers.normalize_dim(dim2, rank)
    rest = [d for d in range(rank) if d not in (d1, d2)]
    n, m = input.shape[d1], input.shape[d2]
    if n < 0 or m < 0:
        raise ValueError("diagonal needs static sizes on dim1 and dim2")
    x = helpers.permute(ctx, input, rest + [d1, d2])
    sizes = D.dims_of(ctx, input)
    lead = [sizes[d] for d in rest]
    x = D.reshape(ctx, x, lead + [n * m])
    first = offset if offset >= 0 else -offset * m
    length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    return slice_dim(ctx, x, len(lead), first if length else 0, length, m + 1)


@converter(aten.unfold.default, validator=_unfold_ok, dynamic=True)
@D.itensor_input
def unfold(ctx, input, dimension, size, step):
    """Windows ``[i*step, i*step+size)`` along ``dimension``, window elements last."""
    rank = len(input.shape)
    dim = helpers.normalize_dim(dimension, rank)
    count = (input.shape[dim] - size) // step + 1
    index = torch.arange(count).unsqueeze(1) * step + torch.arange(size)
    out = ctx.net.add_gather(input, ctx.constant(index), dim)
    out = ctx.name_layer(out, "unfold").get_output(0)
    order = list(range(dim + 1)) + list(range(dim + 2, rank + 1)) + [dim + 1]
    return helpers.permute(ctx, out, order)


def _as_strided_ok(node, settings):
    val = fake_input(node)
    if any(not isinstance(d, int) for d in val.shape):
        return "as_strided needs static input shapes"
    if not val.is_contiguous() or val.storage_offset() != 0:
        return "as_strided of a non-contiguous view depends on storage layout"
    return None


@converter(aten.as_strided.default, aten.as_strided_copy.default, validator=_as_strided_ok)
@D.itensor_input
def as_strided(ctx, input, size, stride, storage_offset=None):
    """Gather from the flattened (contiguous) input at offset + sum(i_k * stride_k)."""
    index = torch.full(list(size), storage_offset or 0, dtype=torch.int64)
    for k, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[k] = n
        index = index + torch.arange(n).reshape(shape) * s
    flat = D.reshape(ctx, input, [-1])
    out = ctx.net.add_gather(flat, ctx.constant(index), 0)
    return ctx.name_layer(out, "as_strided").get_output(0)


@converter(aten.roll.default, dynamic=True)
@D.itensor_input
def roll(ctx, input, shifts, dims=()):
    """out[i] = in[(i - shift) mod n]: a WRAP-mode slice starting at -shift."""
    if not dims:  # roll the flattened tensor
        flat = roll(ctx, D.reshape(ctx, input, [-1]), shifts, [0])
        return D.reshape(ctx, flat, D.dims_of(ctx, input))
    sizes = D.dims_of(ctx, input)
    rank = len(sizes)
    start = [0] * rank
    for shift, dim in zip(shifts, dims):
        d = helpers.normalize_dim(dim, rank)
        start[d] = D.dim_op(ctx, "sub", start[d], shift)
        if not helpers.is_tensor(sizes[d]) and sizes[d] > 0:
            start[d] %= sizes[d]
    return D.slice_nd(ctx, input, start, sizes, [1] * rank, mode=trt.SampleMode.WRAP)
