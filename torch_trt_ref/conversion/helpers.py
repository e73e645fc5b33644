"""Shared building blocks for converters: constants, casts, broadcasting, reshapes with
dynamic dims, axis normalization and torch type promotion. Converters compose these
instead of calling the raw TensorRT API for the same chores."""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from .._trt import to_torch_dtype, to_trt_dtype, trt
from ..weights import untraced
from .context import ConversionContext

ITensor = trt.ITensor
DEFAULT_PROMOTION = ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT


def is_tensor(x: Any) -> bool:
    return isinstance(x, ITensor)


def dtype_of(x: Any) -> torch.dtype:
    """torch dtype of an ITensor, torch.Tensor or Python scalar (torch's scalar rules)."""
    if is_tensor(x):
        return to_torch_dtype(x.dtype)
    if isinstance(x, torch.Tensor):
        return x.dtype
    if isinstance(x, bool):
        return torch.bool
    if isinstance(x, int):
        return torch.int64
    return torch.float32


def rank_of(x: Any) -> int:
    if is_tensor(x):
        return len(x.shape)
    if isinstance(x, torch.Tensor):
        return x.dim()
    return 0


def result_type(*values: Any) -> torch.dtype:
    """torch's type promotion over ITensors, constant tensors and Python scalars. (Dtypes
    and ranks only: Note [Metadata reads skip the weight tracer].)"""
    with untraced():
        probes = []
        for v in values:
            if is_tensor(v) or isinstance(v, torch.Tensor):
                probes.append(torch.empty([1] * rank_of(v), dtype=dtype_of(v)))
            else:
                probes.append(v)
        if len(probes) == 1:
            return probes[0].dtype if isinstance(probes[0], torch.Tensor) else dtype_of(probes[0])
        _, dtype = elementwise_dtypes(*probes, type_promotion_kind=DEFAULT_PROMOTION)
    return dtype


def itensor(ctx: ConversionContext, x: Any, dtype: torch.dtype | None = None):
    """``x`` as an ITensor (constants become constant layers), cast to ``dtype`` if given."""
    if not is_tensor(x):
        if dtype is None:
            dtype = dtype_of(x)
        return ctx.constant(x, dtype)
    return cast(ctx, x, dtype) if dtype is not None else x


def cast(ctx: ConversionContext, x, dtype: torch.dtype):
    if not is_tensor(x):  # a constant (Note [Constant inputs]): a constant layer of dtype
        return itensor(ctx, x, dtype)
    if to_torch_dtype(x.dtype) == dtype:
        return x
    return ctx.name_layer(ctx.net.add_cast(x, to_trt_dtype(dtype)), "cast").get_output(0)


def identity(ctx: ConversionContext, x):
    return ctx.name_layer(ctx.net.add_identity(x), "identity").get_output(0)


def normalize_dim(dim: int, rank: int) -> int:
    if not -max(rank, 1) <= dim < max(rank, 1):
        raise IndexError(f"dim {dim} out of range for rank {rank}")
    return dim % max(rank, 1)


def axes_mask(dims: Sequence[int], rank: int) -> int:
    mask = 0
    for d in dims:
        mask |= 1 << normalize_dim(d, rank)
    return mask


def shape_of(ctx: ConversionContext, x):
    """The runtime shape of ``x`` as a 1-D int64 shape tensor."""
    return ctx.name_layer(ctx.net.add_shape(x), "shape").get_output(0)


def dim_size(ctx: ConversionContext, x, dim: int):
    """Size of ``dim``: a Python int when static, else a 1-element int64 ITensor."""
    dim = normalize_dim(dim, len(x.shape))
    size = x.shape[dim]
    if size >= 0:
        return size
    index = ctx.constant(torch.tensor([dim], dtype=torch.int64))
    gather = ctx.net.add_gather(shape_of(ctx, x), index, 0)
    return ctx.name_layer(gather, "dim_size").get_output(0)


def as_dim(ctx: ConversionContext, d: Any) -> Any:
    """An int, or ``d`` as a 1-element int64 ITensor (SymInts may arrive as 0-d)."""
    if not is_tensor(d):
        return int(d)
    d = cast(ctx, d, torch.int64)
    return reshape(ctx, d, [1]) if tuple(d.shape) != (1,) else d


def shape_tensor(ctx: ConversionContext, dims: Sequence[Any]):
    """A 1-D int64 shape tensor from ints and 0-d/1-element int ITensors; runs of static
    dims become one constant."""
    parts, run = [], []
    for d in list(dims) + [None]:
        if d is not None and not is_tensor(d):
            run.append(int(d))
            continue
        if run:
            parts.append(ctx.constant(torch.tensor(run, dtype=torch.int64)))
            run = []
        if d is not None:
            parts.append(as_dim(ctx, d))
    if not parts:
        return ctx.constant(torch.zeros(0, dtype=torch.int64))
    if len(parts) == 1:
        return parts[0]
    concat = ctx.net.add_concatenation(parts)
    concat.axis = 0
    return ctx.name_layer(concat, "shape_concat").get_output(0)


def reshape(ctx: ConversionContext, x, shape: Sequence[Any]):
    """Reshape to ``shape`` (ints, at most one -1, or ITensor dims). Zero means zero."""
    # The shape tensor is built first: layers are created in topological order.
    dynamic_shape = shape_tensor(ctx, shape) if any(is_tensor(d) for d in shape) else None
    layer = ctx.net.add_shuffle(x)
    layer.zero_is_placeholder = False
    if dynamic_shape is not None:
        layer.set_input(1, dynamic_shape)
    else:
        layer.reshape_dims = tuple(int(d) for d in shape)
    return ctx.name_layer(layer, "reshape").get_output(0)


def permute(ctx: ConversionContext, x, order: Sequence[int]):
    rank = len(x.shape)
    layer = ctx.net.add_shuffle(x)
    layer.first_transpose = tuple(normalize_dim(d, rank) for d in order)
    return ctx.name_layer(layer, "permute").get_output(0)


def insert_ones(ctx: ConversionContext, x, position: int, count: int = 1):
    """Insert ``count`` size-1 dims before dim ``position``; dynamic dims are kept by
    building the new shape from the runtime shape of ``x``."""
    dims = list(x.shape)
    if all(d >= 0 for d in dims):
        return reshape(ctx, x, dims[:position] + [1] * count + dims[position:])
    shape = shape_of(ctx, x)
    parts = []
    if position > 0:
        parts.append(slice_1d(ctx, shape, 0, position))
    parts.append(ctx.constant(torch.ones(count, dtype=torch.int64)))
    if position < len(dims):
        parts.append(slice_1d(ctx, shape, position, len(dims) - position))
    concat = ctx.net.add_concatenation(parts)
    concat.axis = 0
    layer = ctx.net.add_shuffle(x)
    layer.set_input(1, ctx.name_layer(concat, "shape_concat").get_output(0))
    return ctx.name_layer(layer, "insert_ones").get_output(0)


def slice_1d(ctx: ConversionContext, x, start: int, size: int):
    """Elements [start, start + size) of a 1-D tensor."""
    return ctx.name_layer(ctx.net.add_slice(x, (start,), (size,), (1,)), "slice").get_output(0)


def expand_rank(ctx: ConversionContext, x, rank: int):
    """Prepend size-1 dims until ``x`` has ``rank`` dims (numpy broadcasting alignment)."""
    missing = rank - len(x.shape)
    return insert_ones(ctx, x, 0, missing) if missing > 0 else x


def unsqueeze(ctx: ConversionContext, x, dim: int):
    return insert_ones(ctx, x, normalize_dim(dim, len(x.shape) + 1))


def elementwise(ctx: ConversionContext, op, a: Any, b: Any, dtype: torch.dtype | None = None):
    """``a <op> b`` with numpy broadcasting; both sides are cast to ``dtype`` (default:
    torch's promoted type of a and b)."""
    dtype = dtype or result_type(a, b)
    rank = max(rank_of(a), rank_of(b))
    # Constants get their broadcast rank before they become layers (a view, no shuffle).
    a, b = (v.reshape((1,) * (rank - v.dim()) + tuple(v.shape))
            if isinstance(v, torch.Tensor) else v for v in (a, b))
    a, b = itensor(ctx, a, dtype), itensor(ctx, b, dtype)
    a, b = expand_rank(ctx, a, rank), expand_rank(ctx, b, rank)
    return ctx.name_layer(ctx.net.add_elementwise(a, b, op), "elementwise").get_output(0)


def unary(ctx: ConversionContext, op, x):
    """``op`` (a ``trt.UnaryOperation``) applied to the ITensor ``x``: one unary layer."""
    return ctx.name_layer(ctx.net.add_unary(x, op), "unary").get_output(0)


def activation(ctx: ConversionContext, kind, x, alpha: float | None = None,
               beta: float | None = None):
    layer = ctx.net.add_activation(x, kind)
    if alpha is not None:
        layer.alpha = alpha
    if beta is not None:
        layer.beta = beta
    return ctx.name_layer(layer, "activation").get_output(0)
