"""Converters that create tensors: full/full_like, the empty family (emitted as zeros),
arange, scalar_tensor and tril/triu_indices. Sizes may be SymInts (dynamic shapes)."""

from __future__ import annotations

import torch

from ... import _trt
from .. import dims as D
from .. import helpers
from ..blocks.index import filled
from ..blocks.nodes import node_args, strided_ok
from ..registry import converter

aten = torch.ops.aten


@converter(aten.full.default, validator=strided_ok, dynamic=True)
def full(ctx, size, fill_value, dtype=None, layout=None, device=None, pin_memory=None):
    return filled(ctx, size, fill_value, ctx.out_dtype)


@converter(aten.full_like.default, validator=strided_ok, dynamic=True)
@D.itensor_input
def full_like(ctx, input, fill_value, dtype=None, layout=None, device=None, pin_memory=None,
              memory_format=None):
    return filled(ctx, D.dims_of(ctx, helpers.itensor(ctx, input)), fill_value, ctx.out_dtype)


# Note [Empty tensors]: torch leaves ``empty`` uninitialized; we emit zeros, which is one
# of the values torch may return. Conformance cases compare only shape and dtype.
@converter(aten.empty.memory_format, aten.empty_permuted.default, aten.empty_strided.default,
           validator=strided_ok, dynamic=True)
def empty(ctx, size, *args, **kwargs):
    return filled(ctx, size, 0, ctx.out_dtype)


@converter(aten.new_empty_strided.default, validator=strided_ok, dynamic=True)
@D.itensor_input
def new_empty_strided(ctx, input, size, stride, **kwargs):
    return filled(ctx, size, 0, ctx.out_dtype)


@converter(aten.scalar_tensor.default, validator=strided_ok, dynamic=True)
def scalar_tensor(ctx, s, dtype=None, layout=None, device=None, pin_memory=None):
    if helpers.is_tensor(s):
        return D.reshape(ctx, helpers.cast(ctx, s, ctx.out_dtype), [])
    return ctx.constant(torch.tensor(s, dtype=ctx.out_dtype))


def _arange_ok(node, settings):
    reason = strided_ok(node, settings)
    step = node_args(node)["step"]
    if reason is None and isinstance(step, torch.fx.Node):
        return "a symbolic arange step is not supported"
    return reason


@converter(aten.arange.start_step, validator=_arange_ok, dynamic=True)
def arange(ctx, start, end, step=1, dtype=None, layout=None, device=None, pin_memory=None):
    dtype = ctx.out_dtype
    if not helpers.is_tensor(start) and not helpers.is_tensor(end):
        values = torch.arange(start, end, step, dtype=dtype)
        if values.numel() == 0:  # TensorRT keeps no weights for an empty constant
            return D.slice_nd(ctx, ctx.constant(torch.zeros(1, dtype=dtype)), [0], [0], [1])
        return ctx.constant(values)
    # Symbolic bounds are integers: length = ceil((end - start) / step).
    span = D.dim_op(ctx, "sub", D.as_dim(ctx, end), D.as_dim(ctx, start))
    span = D.dim_op(ctx, "add", span, step - 1 if step > 0 else step + 1)
    length = D.dim_op(ctx, "max", D.dim_op(ctx, "floordiv", span, step), 0)
    fill_type = torch.int64 if not dtype.is_floating_point else torch.float32
    shape = D.shape_tensor(ctx, [length])
    if helpers.is_tensor(start):  # inputs first: the network's layer order is its run order
        alpha = D.reshape(ctx, helpers.cast(ctx, start, fill_type), [])
        delta = ctx.constant(torch.tensor([step], dtype=fill_type))
    layer = ctx.net.add_fill((1,), _trt.trt.FillOperation.LINSPACE, _trt.to_trt_dtype(fill_type))
    layer.set_input(0, shape)
    if helpers.is_tensor(start):
        layer.set_input(1, alpha)
        layer.set_input(2, delta)
    else:
        layer.alpha, layer.beta = start, step
    return ctx.name_layer(layer, "arange").get_output(0)


@converter(aten.tril_indices.default, aten.triu_indices.default, validator=strided_ok)
def tri_indices(ctx, row, col, offset=0, dtype=None, layout=None, device=None,
                pin_memory=None):
    fn = torch.tril_indices if ctx.node.target == aten.tril_indices.default \
        else torch.triu_indices
    return ctx.constant(fn(row, col, offset, dtype=ctx.out_dtype))
