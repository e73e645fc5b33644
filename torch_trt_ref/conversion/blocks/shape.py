"""Shape building blocks: rank changes (``add_leading_one``, ``drop_dim``, ``reshape_like``),
per-channel vectors, ``slice_dim`` (a strided run of one dim) and its bounds, ``pad_slice``
(every padding mode as one slice), ``squeeze_dims``, ``repeat_tensor`` and ``repeat_heads``,
and ``index_vector`` (0..length-1 for a length that may be a runtime size)."""

from __future__ import annotations

import torch

from ..._trt import trt
from .. import dims as D
from .. import helpers
from .nodes import int_sizes


def add_leading_one(ctx, x):
    return helpers.insert_ones(ctx, x, 0)

def drop_dim(ctx, x, dim: int):
    """Remove size-1 dim ``dim`` of ``x`` (dynamic dims are kept via the runtime shape)."""
    rank = len(x.shape)
    dim = helpers.normalize_dim(dim, rank)
    dims = [helpers.dim_size(ctx, x, d) for d in range(rank) if d != dim]
    return helpers.reshape(ctx, x, dims)

def reshape_like(ctx, x, like):
    """Reshape ``x`` to the runtime shape of ``like``."""
    if int_sizes(like.shape) and all(d >= 0 for d in like.shape):
        return helpers.reshape(ctx, x, list(like.shape))
    shape = helpers.shape_of(ctx, like)  # before the shuffle: layers in topological order
    layer = ctx.net.add_shuffle(x)
    layer.set_input(1, shape)
    return ctx.name_layer(layer, "reshape_like").get_output(0)

def channel_view(value: torch.Tensor, rank: int) -> torch.Tensor:
    """A per-channel vector (C,) as (1, C, 1, ...) of ``rank`` dims, for broadcasting."""
    return value.reshape((1, -1) + (1,) * (rank - 2))

def channel_itensor(ctx, value, rank: int, dtype: torch.dtype):
    """A per-channel vector (torch tensor or ITensor) as a (1, C, 1, ...) ITensor."""
    if isinstance(value, torch.Tensor):
        return helpers.itensor(ctx, channel_view(value, rank), dtype)
    value = helpers.cast(ctx, value, dtype)
    return helpers.reshape(ctx, value, [1, value.shape[0]] + [1] * (rank - 2))

def index_vector(ctx, length):
    """0, 1, ..., length - 1 as an int64 ITensor; ``length`` is an int or a 1-element int64
    ITensor (a runtime size)."""
    if not helpers.is_tensor(length):
        return helpers.itensor(ctx, torch.arange(length, dtype=torch.int64))
    fill = ctx.net.add_fill((1,), trt.FillOperation.LINSPACE, trt.int64)
    fill.set_input(0, length)
    fill.alpha, fill.beta = 0, 1
    return ctx.name_layer(fill, "positions").get_output(0)

INT64_MAX = 2**63 - 1

def slice_bound(ctx, value, size: D.Dim, default: int) -> D.Dim:
    """torch's slice bound: None -> default, negative values count from the end, then
    clamped to [0, size]."""
    if value is None:
        return default if default == 0 else size
    if helpers.is_tensor(value):
        return D.clamp(ctx, D.wrap_negative_dim(ctx, value, size), 0, size)
    if value >= INT64_MAX:
        return size
    if value < 0:
        return D.dim_op(ctx, "max", D.dim_op(ctx, "add", size, value), 0)
    return D.dim_op(ctx, "min", size, value)

def slice_dim(ctx, x, dim: int, start: D.Dim, length: D.Dim, step: int = 1):
    """Elements ``start, start + step, ...`` (``length`` of them) of dim ``dim``."""
    sizes = D.dims_of(ctx, x)
    rank = len(sizes)
    begin, stride = [0] * rank, [1] * rank
    begin[dim], sizes[dim], stride[dim] = start, length, step
    return D.slice_nd(ctx, x, begin, sizes, stride)

MODE = trt.SampleMode

def pad_slice(ctx, x, pad, mode, fill=None):
    """``pad`` lists (pre, post) pairs from the last dim backwards, as in torch. With
    negative pads, circular padding wraps around the cropped tensor while reflection and
    replication index the whole input (F.pad(arange(6), (-2, 3)) is [2, 3, 4, 5, 2, 3, 4]
    circular, [2, 3, 4, 5, 4, 3, 2] reflect, [2, 3, 4, 5, 5, 5, 5] replicate): one slice
    starting at -pre does the latter."""
    if any(p < 0 for p in pad) and any(p > 0 for p in pad) and mode == MODE.WRAP:
        x = pad_slice(ctx, x, [min(p, 0) for p in pad], None)
        pad = [max(p, 0) for p in pad]
    sizes = D.dims_of(ctx, x)
    rank = len(sizes)
    start = [0] * rank
    for k in range(len(pad) // 2):
        d = rank - 1 - k
        pre, post = pad[2 * k], pad[2 * k + 1]
        start[d] = -pre
        sizes[d] = D.dim_op(ctx, "add", sizes[d], pre + post)
    return D.slice_nd(ctx, x, start, sizes, [1] * rank, mode=mode, fill=fill)


@D.itensor_input
def squeeze_dims(ctx, input, dim):
    """torch.squeeze(input, dim): drop the listed dims that have size 1."""
    rank = len(input.shape)
    if rank == 0:
        return input
    drop = {helpers.normalize_dim(d, rank) for d in dim}
    drop = {d for d in drop if input.shape[d] == 1}
    if not drop:
        return input
    kept = [d for i, d in enumerate(D.dims_of(ctx, input)) if i not in drop]
    return D.reshape(ctx, input, kept)


@D.itensor_input
def repeat_tensor(ctx, input, repeats):
    """torch.Tensor.repeat. A WRAP-mode slice reads in[i % size]: tiling without copies of
    the input."""
    x = helpers.expand_rank(ctx, input, len(repeats))
    sizes = [D.dim_op(ctx, "mul", s, D.as_dim(ctx, r))
             for s, r in zip(D.dims_of(ctx, x), repeats)]
    rank = len(sizes)
    return D.slice_nd(ctx, x, [0] * rank, sizes, [1] * rank, mode=trt.SampleMode.WRAP)


def repeat_heads(ctx, x, groups: int):
    """[..., H, S, D] -> [..., H * groups, S, D], every head repeated ``groups`` times in
    place (torch's repeat_interleave on dim -3, grouped-query attention): a unit dim
    broadcast to ``groups`` after the head dim, then merged into it."""
    dims = D.dims_of(ctx, x)
    rank = len(dims)
    x = helpers.unsqueeze(ctx, x, rank - 2)
    x = D.broadcast_to(ctx, x, [*dims[:-2], groups, *dims[-2:]])
    return D.reshape(ctx, x, [*dims[:-3], dims[-3] * groups, *dims[-2:]])
