"""Composite ATen ops Torch-TensorRT converts whole (matmul, linear, pad, tile, pixel
shuffle, sdpa, ...). The default lowering decomposes each of them into core ATen ops; these
converters serve graphs that keep them (``disabled_decompositions``), built from the same
blocks as the core converters."""

from __future__ import annotations

import torch
from torch.fx import Node

from .. import dims as D
from .. import helpers
from .._trt_ops import EW
from ..blocks.index import scatter_elements
from ..blocks.linalg import MAT, attention
from ..blocks.nodes import (
    FLOAT_DTYPES,
    fake,
    fake_input,
    float_operands_ok,
    node_args,
    plain_dtypes_ok,
)
from ..blocks.reduce import where
from ..blocks.shape import MODE, pad_slice, repeat_heads, repeat_tensor, slice_dim, squeeze_dims
from ..registry import converter

aten = torch.ops.aten


# ---------------------------------------------------------------------------------------
# Matrix products with torch.matmul's rank rules: a 1-D left operand is a row [1, n] and a
# 1-D right operand a column [n, 1], their added dim dropped afterwards; batch dims
# broadcast (IMatrixMultiplyLayer broadcasts size-1 batch dims of equal-rank operands).

def matmul_nd(ctx, a, b, transpose_b: bool = False):
    dtype = ctx.out_dtype
    a, b = helpers.itensor(ctx, a, dtype), helpers.itensor(ctx, b, dtype)
    vector_a, vector_b = len(a.shape) == 1, len(b.shape) == 1
    if vector_a:
        a = D.reshape(ctx, a, [1, D.dims_of(ctx, a)[0]])
    if vector_b:
        b = D.reshape(ctx, b, [D.dims_of(ctx, b)[0], 1])
    rank = max(len(a.shape), len(b.shape))
    a, b = helpers.expand_rank(ctx, a, rank), helpers.expand_rank(ctx, b, rank)
    layer = ctx.net.add_matrix_multiply(a, MAT.NONE, b,
                                        MAT.TRANSPOSE if transpose_b else MAT.NONE)
    out = ctx.name_layer(layer, "matmul").get_output(0)
    dims = D.dims_of(ctx, out)
    keep = dims[:-2] + ([] if vector_a else [dims[-2]]) + ([] if vector_b else [dims[-1]])
    return D.reshape(ctx, out, keep) if vector_a or vector_b else out


@converter(aten.matmul.default, aten.dot.default, aten.mv.default,
           validator=float_operands_ok, dynamic=True)
def matmul(ctx, input, other=None, tensor=None, vec=None):
    """matmul(self, other), dot(self, tensor), mv(self, vec): one rule for all three."""
    return matmul_nd(ctx, input, next(x for x in (other, tensor, vec) if x is not None))


@converter(aten.linear.default, validator=float_operands_ok, dynamic=True)
def linear(ctx, input, weight, bias=None):
    """x @ weight^T (+ bias); the weight is read transposed, not copied."""
    out = matmul_nd(ctx, input, weight, transpose_b=True)
    if bias is None:
        return out
    return helpers.elementwise(ctx, EW.SUM, out, bias, ctx.out_dtype)


# ---------------------------------------------------------------------------------------
# Shapes.

@converter(aten.detach.default, dynamic=True)
def detach(ctx, input):
    """An identity (the lowering removes detach; this serves graphs that keep it)."""
    return helpers.identity(ctx, helpers.itensor(ctx, input))


@converter(aten.squeeze.dim, dynamic=True)
def squeeze_dim(ctx, input, dim):
    return squeeze_dims(ctx, input, [dim])


@converter(aten.tile.default, dynamic=True)
def tile(ctx, input, dims):
    """tile with ``dims`` padded by leading 1s to the input's rank (a longer ``dims``
    adds leading dims, as tile does)."""
    return repeat_tensor(ctx, input, [1] * (len(input.shape) - len(dims)) + list(dims))


def _shuffle_ok(node: Node, settings) -> str | None:
    if fake_input(node).dim() < 3:
        return "pixel (un)shuffle needs a tensor of rank >= 3"
    return None


def _pixel_shuffle(ctx, x, factor: int, up: bool):
    """(*, C r^2, H, W) <-> (*, C, H r, W r): split the channels (or the spatial dims) by
    the factor, interleave with a permutation, merge."""
    x = helpers.itensor(ctx, x)
    dims = D.dims_of(ctx, x)
    batch, (c, h, w) = dims[:-3], dims[-3:]
    k = len(batch)
    r = factor
    if up:
        split = batch + [D.dim_op(ctx, "floordiv", c, r * r), r, r, h, w]
        order = list(range(k)) + [k, k + 3, k + 1, k + 4, k + 2]
        merged = batch + [D.dim_op(ctx, "floordiv", c, r * r), D.dim_op(ctx, "mul", h, r),
                          D.dim_op(ctx, "mul", w, r)]
    else:
        split = batch + [c, D.dim_op(ctx, "floordiv", h, r), r,
                         D.dim_op(ctx, "floordiv", w, r), r]
        order = list(range(k)) + [k, k + 2, k + 4, k + 1, k + 3]
        merged = batch + [D.dim_op(ctx, "mul", c, r * r), D.dim_op(ctx, "floordiv", h, r),
                          D.dim_op(ctx, "floordiv", w, r)]
    out = helpers.permute(ctx, D.reshape(ctx, x, split), order)
    return D.reshape(ctx, out, merged)


@converter(aten.pixel_shuffle.default, validator=_shuffle_ok, dynamic=True)
def pixel_shuffle(ctx, input, upscale_factor):
    return _pixel_shuffle(ctx, input, upscale_factor, up=True)


@converter(aten.pixel_unshuffle.default, validator=_shuffle_ok, dynamic=True)
def pixel_unshuffle(ctx, input, downscale_factor):
    return _pixel_shuffle(ctx, input, downscale_factor, up=False)


_PAD_MODES = {"reflect": MODE.REFLECT, "replicate": MODE.CLAMP, "circular": MODE.WRAP}


def _pad_ok(node: Node, settings) -> str | None:
    mode = node_args(node)["mode"]
    if mode != "constant" and mode not in _PAD_MODES:
        return f"pad mode {mode!r} is not supported"
    return None


@converter(aten.pad.default, validator=_pad_ok, dynamic=True)
def pad(ctx, input, pad, mode="constant", value=None):
    x = helpers.itensor(ctx, input)
    if mode == "constant":
        fill = 0 if value is None else value
        fill = bool(fill) if helpers.dtype_of(x) == torch.bool else fill
        return pad_slice(ctx, x, pad, MODE.FILL, fill=fill)
    return pad_slice(ctx, x, pad, _PAD_MODES[mode])


# ---------------------------------------------------------------------------------------
# Index writes and vector algebra.

@converter(aten.index_copy.default, validator=plain_dtypes_ok, dynamic=True)
def index_copy(ctx, input, dim, index, source):
    """Slice i of ``source`` along ``dim`` lands at index[i]: an ELEMENT scatter with the
    index broadcast to the source's shape."""
    x = helpers.itensor(ctx, input)
    src = helpers.itensor(ctx, source, helpers.dtype_of(x))
    dim = helpers.normalize_dim(dim, len(x.shape))
    sizes = D.dims_of(ctx, src)
    shape = [1] * len(sizes)
    shape[dim] = sizes[dim]
    index = D.reshape(ctx, helpers.itensor(ctx, index, torch.int64), shape)
    return scatter_elements(ctx, x, dim, D.broadcast_to(ctx, index, sizes), src)


@converter(aten.linalg_cross.default, validator=plain_dtypes_ok, dynamic=True)
def linalg_cross(ctx, input, other, dim=-1):
    """c_i = a_(i+1) b_(i+2) - a_(i+2) b_(i+1) over the size-3 ``dim``, broadcasting."""
    dtype = ctx.out_dtype
    a, b = helpers.itensor(ctx, input, dtype), helpers.itensor(ctx, other, dtype)
    rank = max(len(a.shape), len(b.shape))
    a, b = helpers.expand_rank(ctx, a, rank), helpers.expand_rank(ctx, b, rank)
    dim = helpers.normalize_dim(dim, rank)
    pa = [slice_dim(ctx, a, dim, i, 1) for i in range(3)]
    pb = [slice_dim(ctx, b, dim, i, 1) for i in range(3)]
    parts = []
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        left = helpers.elementwise(ctx, EW.PROD, pa[j], pb[k], dtype)
        right = helpers.elementwise(ctx, EW.PROD, pa[k], pb[j], dtype)
        parts.append(helpers.elementwise(ctx, EW.SUB, left, right, dtype))
    layer = ctx.net.add_concatenation(parts)
    layer.axis = dim
    return ctx.name_layer(layer, "cross").get_output(0)


def _grouped_heads_ok(node: Node, settings) -> str | None:
    """Validator of scaled_dot_product_attention: no dropout, float inputs, and with
    ``enable_gqa`` static head counts, the query's a multiple of the key's."""
    args = node_args(node)
    if args["dropout_p"] != 0.0:
        return "attention dropout is random and stays in PyTorch"
    if args["enable_gqa"]:
        q, k = fake(args["query"]), fake(args["key"])
        hq, hk = q.shape[-3], k.shape[-3]
        if not (isinstance(hq, int) and isinstance(hk, int)) or hk == 0 or hq % hk:
            return "grouped-query attention needs static head counts, query's a multiple of key's"
    if fake(args["query"]).dtype not in FLOAT_DTYPES:
        return "attention takes float inputs only"
    return None


@converter(aten.scaled_dot_product_attention.default, validator=_grouped_heads_ok, dynamic=True)
def scaled_dot_product_attention(ctx, query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """A bool mask keeps True positions (False adds -inf); a float mask is added. With
    enable_gqa, each key/value head serves Hq / Hkv consecutive query heads (torch's
    repeat_interleave on dim -3)."""
    key, value = helpers.itensor(ctx, key), helpers.itensor(ctx, value)
    if enable_gqa and query.shape[-3] != key.shape[-3]:
        groups = query.shape[-3] // key.shape[-3]
        key, value = repeat_heads(ctx, key, groups), repeat_heads(ctx, value, groups)
    bias = attn_mask
    if bias is not None and helpers.dtype_of(bias) == torch.bool:
        bias = where(ctx, helpers.itensor(ctx, bias), 0.0, float("-inf"))
    out, _ = attention(ctx, helpers.itensor(ctx, query), key, value, bias, is_causal, scale)
    return out

