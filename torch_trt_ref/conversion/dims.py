"""Shape arithmetic for converters: a dim is a Python int when static or a 1-element int64
ITensor when it is only known at run time. Ints stay in Python; layers are emitted only
for the parts of a shape computation that are really dynamic."""

from __future__ import annotations

import functools
import operator
from typing import Any, Sequence, Union

import torch

from . import helpers
from ._trt_ops import EW
from .context import ConversionContext

Dim = Union[int, Any]  # int or a 1-element int64 trt.ITensor

_OPS = {  # name -> (Python function on ints, TensorRT elementwise operation)
    "add": (operator.add, EW.SUM), "sub": (operator.sub, EW.SUB),
    "mul": (operator.mul, EW.PROD), "floordiv": (operator.floordiv, EW.FLOOR_DIV),
    "min": (min, EW.MIN), "max": (max, EW.MAX),
}


def itensor_input(fn):
    """Decorator for converters: the ``input`` argument arrives as an ITensor even when
    the graph passes a constant (a buffer such as BERT's position_ids)."""

    @functools.wraps(fn)
    def wrapped(ctx, input, *args, **kwargs):
        return fn(ctx, helpers.itensor(ctx, input), *args, **kwargs)

    return wrapped


def no_shape_tensors(dims: Sequence[Dim]) -> bool:
    """No dim is a shape tensor (an ITensor): all are known when the network is built."""
    return not any(helpers.is_tensor(d) for d in dims)


as_dim = helpers.as_dim
shape_tensor = helpers.shape_tensor
reshape = helpers.reshape


def dim_op(ctx: ConversionContext, name: str, a: Dim, b: Dim) -> Dim:
    """``a <name> b`` for name in add/sub/mul/floordiv/min/max, folded when both are ints."""
    fn, op = _OPS[name]
    if not helpers.is_tensor(a) and not helpers.is_tensor(b):
        return fn(int(a), int(b))
    a, b = as_dim(ctx, a), as_dim(ctx, b)
    a = a if helpers.is_tensor(a) else ctx.constant(torch.tensor([a], dtype=torch.int64))
    b = b if helpers.is_tensor(b) else ctx.constant(torch.tensor([b], dtype=torch.int64))
    return ctx.name_layer(ctx.net.add_elementwise(a, b, op), f"dim_{name}").get_output(0)


def wrap_negative_dim(ctx: ConversionContext, d: Dim, size: Dim) -> Dim:
    """Python's index rule: a negative ``d`` counts from the end (``d + size``)."""
    if not helpers.is_tensor(d):
        return dim_op(ctx, "add", size, d) if d < 0 else d
    zero = ctx.constant(torch.zeros(1, dtype=torch.int64))
    negative = ctx.net.add_elementwise(as_dim(ctx, d), zero, EW.LESS)
    negative = ctx.name_layer(negative, "dim_is_negative").get_output(0)
    wrapped = dim_op(ctx, "add", d, size)
    return ctx.name_layer(ctx.net.add_select(negative, as_dim(ctx, wrapped), as_dim(ctx, d)),
                          "dim_wrap").get_output(0)


def clamp(ctx: ConversionContext, d: Dim, low: Dim, high: Dim) -> Dim:
    return dim_op(ctx, "min", dim_op(ctx, "max", d, low), high)


def dims_of(ctx: ConversionContext, x) -> list[Dim]:
    """Every dim of ``x``: ints where TensorRT knows them statically, else gathered from
    one shared shape layer."""
    static = list(x.shape)
    if all(d >= 0 for d in static):
        return static
    shape = helpers.shape_of(ctx, x)
    out: list[Dim] = []
    for i, d in enumerate(static):
        if d >= 0:
            out.append(d)
        else:
            index = ctx.constant(torch.tensor([i], dtype=torch.int64))
            gather = ctx.net.add_gather(shape, index, 0)
            out.append(ctx.name_layer(gather, "dim_size").get_output(0))
    return out


def slice_nd(ctx: ConversionContext, x, start: Sequence[Dim], size: Sequence[Dim],
             stride: Sequence[Dim], mode=None, fill: Any = None):
    """An ISliceLayer over every dim; dynamic start/size/stride become shape inputs.
    ``fill`` (a Python scalar) is the value read out of bounds in FILL mode."""
    rank = len(x.shape)
    static = no_shape_tensors(list(start) + list(size) + list(stride))
    shapes = [] if static else [shape_tensor(ctx, v) for v in (start, size, stride)]
    value = None if fill is None else ctx.constant(torch.tensor(fill, dtype=helpers.dtype_of(x)))
    if static:
        layer = ctx.net.add_slice(x, tuple(map(int, start)), tuple(map(int, size)),
                                  tuple(map(int, stride)))
    else:
        layer = ctx.net.add_slice(x, (0,) * rank, (1,) * rank, (1,) * rank)
        for index, tensor in enumerate(shapes, start=1):
            layer.set_input(index, tensor)
    if mode is not None:
        layer.mode = mode
    if value is not None:
        layer.set_input(4, value)
    return ctx.name_layer(layer, "slice").get_output(0)


def broadcast_to(ctx: ConversionContext, x, dims: Sequence[Dim]):
    """Broadcast ``x`` (rank <= len(dims), numpy alignment) to ``dims`` with a stride-0
    slice; dims of ``x`` that are not 1 must already equal the target."""
    x = helpers.expand_rank(ctx, x, len(dims))
    if list(x.shape) == [d for d in dims]:
        return x
    stride = [0 if s == 1 and not (not helpers.is_tensor(d) and int(d) == 1) else 1
              for s, d in zip(x.shape, dims)]
    return slice_nd(ctx, x, [0] * len(dims), dims, stride)
