"""Reduction and index-vector building blocks: one IReduceLayer (``reduce``) over torch's
reduction dims, ``arange`` and ``positions`` (0..n-1, and the index along a dim shaped to
broadcast), and ``where`` (torch.where with broadcasting and Python scalars, promoted)."""

from __future__ import annotations

import torch

from ..._trt import to_trt_dtype, trt
from .. import dims as D
from .. import helpers

# IReduceLayer / ICumulativeLayer accept these types; bool and 8-bit types go via int32.
REDUCIBLE = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)

def reduce_dims(dim, rank: int) -> list[int]:
    """torch's reduction dims: None or [] means every dim; negatives count from the end."""
    if dim is None:
        return list(range(rank))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted({helpers.normalize_dim(d, rank) for d in dims}) or list(range(rank))

def reduce(ctx, op, x, dims: list[int], keepdim: bool):
    """One IReduceLayer; a 0-d input is its own reduction."""
    if len(x.shape) == 0:
        return x
    layer = ctx.net.add_reduce(x, op, helpers.axes_mask(dims, len(x.shape)), keepdim)
    return ctx.name_layer(layer, "reduce").get_output(0)

def arange(ctx, n: D.Dim, dtype: torch.dtype = torch.int64):
    """[0, 1, ..., n-1]; a LINSPACE fill when ``n`` is only known at run time."""
    if not helpers.is_tensor(n):
        return ctx.constant(torch.arange(int(n), dtype=dtype))
    layer = ctx.net.add_fill((1,), trt.FillOperation.LINSPACE, to_trt_dtype(dtype))
    layer.set_input(0, D.shape_tensor(ctx, [n]))
    layer.alpha, layer.beta = 0, 1
    return ctx.name_layer(layer, "arange").get_output(0)

def positions(ctx, x, dim: int, dtype: torch.dtype = torch.int64):
    """The index along ``dim`` shaped to broadcast against ``x``: [1, .., n, .., 1]."""
    rank = len(x.shape)
    n = D.dims_of(ctx, x)[dim]
    return D.reshape(ctx, arange(ctx, n, dtype), [1] * dim + [n] + [1] * (rank - dim - 1))

def where(ctx, condition, then, otherwise):
    """torch.where with broadcasting; ``then``/``otherwise`` may be Python scalars."""
    dtype = helpers.result_type(then, otherwise)
    values = [helpers.itensor(ctx, v, dtype) for v in (then, otherwise)]
    rank = max(len(t.shape) for t in values + [condition])
    condition, a, b = (helpers.expand_rank(ctx, t, rank) for t in [condition] + values)
    return ctx.name_layer(ctx.net.add_select(condition, a, b), "select").get_output(0)
