"""Converters for views and layout ops: view/reshape, permute, expand, squeeze/unsqueeze,
clone, dtype copies, concatenation, resize and their ``*_copy`` variants."""

from __future__ import annotations

import functools

import torch

from .. import dims as D
from .. import helpers
from ..blocks.nodes import fake_input
from ..blocks.shape import squeeze_dims
from ..registry import converter

aten = torch.ops.aten
DEFAULT_FORMATS = (None, torch.preserve_format, torch.contiguous_format)


@converter(aten.view.default, aten.view_copy.default, aten._reshape_copy.default, dynamic=True)
@D.itensor_input
def view(ctx, input, size):
    return D.reshape(ctx, input, [D.as_dim(ctx, s) for s in size])


@converter(aten.permute.default, aten.permute_copy.default, dynamic=True,
           constants=("input",))
def permute(ctx, input, dims):
    """A permuted weight stays a torch view, so a matrix multiply can read the weight
    transposed instead of the engine holding a transposed copy."""
    if isinstance(input, torch.Tensor):
        return input.permute(dims)
    return helpers.permute(ctx, input, dims) if len(input.shape) else input


@converter(aten.expand.default, dynamic=True)
@D.itensor_input
def expand(ctx, input, size, implicit=False):
    x = helpers.expand_rank(ctx, input, len(size))
    current = D.dims_of(ctx, x)
    target = [cur if not helpers.is_tensor(s) and s == -1 else D.as_dim(ctx, s)
              for s, cur in zip(size, current)]
    return D.broadcast_to(ctx, x, target)


@converter(aten.squeeze.dims, dynamic=True)
def squeeze(ctx, input, dim):
    return squeeze_dims(ctx, input, dim)


@converter(aten.unsqueeze.default, dynamic=True)
@D.itensor_input
def unsqueeze(ctx, input, dim):
    return helpers.unsqueeze(ctx, input, dim)


def _layout_ok(node, settings):
    """Values are what matters in TensorRT: any memory format is an identity copy."""
    layout = node.kwargs.get("layout")
    if layout not in (None, torch.strided):
        return f"layout {layout} is not supported"
    return None


@converter(aten.clone.default, validator=_layout_ok, dynamic=True)
@D.itensor_input
def clone(ctx, input, memory_format=None):
    return helpers.identity(ctx, input)


def _to_copy_ok(node, settings):
    src, out = fake_input(node), node.meta.get("val")
    if node.kwargs.get("layout") not in (None, torch.strided):
        return f"layout {node.kwargs['layout']} is not supported"
    if node.kwargs.get("memory_format") not in DEFAULT_FORMATS:
        return f"memory_format {node.kwargs['memory_format']} is not supported"
    if isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor) \
            and src.device != out.device:
        return f"device transfer {src.device} -> {out.device} stays in PyTorch"
    return None


@converter(aten._to_copy.default, validator=_to_copy_ok, dynamic=True)
@D.itensor_input
def to_copy(ctx, input, dtype=None, layout=None, device=None, pin_memory=None,
            non_blocking=False, memory_format=None):
    out = helpers.itensor(ctx, input)
    return helpers.cast(ctx, out, ctx.out_dtype) if helpers.dtype_of(out) != ctx.out_dtype \
        else helpers.identity(ctx, out)


@converter(aten.copy.default, dynamic=True)
@D.itensor_input
def copy(ctx, input, src, non_blocking=False):
    """``input.copy_(src)`` out of place: src broadcast to input's shape and dtype."""
    src = helpers.itensor(ctx, src, helpers.dtype_of(input))
    return D.broadcast_to(ctx, src, D.dims_of(ctx, input))


@converter(aten.cat.default, dynamic=True)
def cat(ctx, tensors, dim=0):
    dtype = ctx.out_dtype
    # torch ignores legacy empty 1-D tensors of shape (0,) when the others have rank > 1.
    ranks = {helpers.rank_of(t) for t in tensors}
    rank = max(ranks)
    inputs = [helpers.itensor(ctx, t, dtype) for t in tensors
              if not (rank > 1 and helpers.rank_of(t) == 1 and _numel_zero(t))]
    axis = helpers.normalize_dim(dim, rank)
    non_empty = [t for t in inputs if t.shape[axis] != 0]
    inputs = non_empty or inputs[:1]
    if len(inputs) == 1:
        return helpers.identity(ctx, inputs[0])
    layer = ctx.net.add_concatenation(inputs)
    layer.axis = axis
    return ctx.name_layer(layer, "concat").get_output(0)


def _numel_zero(t) -> bool:
    return any(d == 0 for d in t.shape)


@converter(aten.native_channel_shuffle.default)
@D.itensor_input
def channel_shuffle(ctx, input, groups):
    """(N, C, *rest) -> (N, g, C/g, *rest) -> swap the two group dims -> (N, C, *rest)."""
    sizes = D.dims_of(ctx, input)
    channels = sizes[1]
    if helpers.is_tensor(channels):
        raise ValueError("channel_shuffle needs a static channel dim")
    grouped = D.reshape(ctx, input, [sizes[0], groups, channels // groups] + sizes[2:])
    order = [0, 2, 1] + list(range(3, len(sizes) + 1))
    return D.reshape(ctx, helpers.permute(ctx, grouped, order), sizes)


# Note [resize]: ``x.resize_(size)`` reinterprets x's storage in the new size, growing it
# with uninitialized memory. Functionalization turns it into ``aten.resize``; both are
# converted when torch knows the result is a prefix of x's contiguous elements: x is
# contiguous and the new size holds at most as many elements.
def _resize_ok(node, settings):
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    source, out = fake_input(node), node.meta.get("val")
    if source is None or out is None:
        return "resize needs shape metadata"
    if not statically_known_true(source.is_contiguous()):
        return "resize of a non-contiguous tensor reads its storage order"
    if not statically_known_true(out.numel() <= source.numel()):
        return "resize that grows a tensor exposes uninitialized memory"
    if node.kwargs.get("memory_format") not in DEFAULT_FORMATS:
        return "resize to a non-contiguous memory format is not supported"
    return None


@converter(aten.resize.default, aten.resize_.default, validator=_resize_ok, dynamic=True)
@D.itensor_input
def resize(ctx, input, size, memory_format=None):
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    size = [D.as_dim(ctx, s) for s in size]
    if statically_known_true(ctx.out_meta.numel() == fake_input(ctx.node).numel()):
        return D.reshape(ctx, input, size)
    flat = D.reshape(ctx, input, [-1])
    count = functools.reduce(lambda a, b: D.dim_op(ctx, "mul", a, b), size, 1)
    return D.reshape(ctx, D.slice_nd(ctx, flat, [0], [count], [1]), size)
