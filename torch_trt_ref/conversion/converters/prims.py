"""Converters for the ``prims`` ops Torch-TensorRT takes (prims.sum, prims.div,
prims.broadcast_in_dim): they reach conversion from graphs traced through torch's
reference decompositions. Prims do no type promotion: inputs already share the dtype."""

from __future__ import annotations

import torch

from .. import dims as D
from .. import helpers
from .._trt_ops import EW, RED
from ..blocks.elementwise import trunc_divide
from ..blocks.nodes import plain_dtypes_ok
from ..blocks.reduce import REDUCIBLE, reduce
from ..registry import converter

prims = torch.ops.prims


@converter(prims.sum.default, validator=plain_dtypes_ok, dynamic=True)
def prims_sum(ctx, inp, dims, output_dtype=None):
    """Sum over ``dims``, no keepdim; None or [] sums every dim (its eager kernel is
    aten.sum's)."""
    out = ctx.out_dtype
    x = helpers.cast(ctx, inp, out if out in REDUCIBLE else torch.int32)
    rank = len(x.shape)
    dims = dims or range(rank)
    return reduce(ctx, RED.SUM, x, sorted(helpers.normalize_dim(d, rank) for d in dims), False)


@converter(prims.div.default, validator=plain_dtypes_ok, dynamic=True)
def prims_div(ctx, input, other):
    """True division for floats; integers round toward zero (C's ``/``), unlike
    aten.div's true division."""
    dtype = ctx.out_dtype
    if dtype.is_floating_point:
        return helpers.elementwise(ctx, EW.DIV, input, other, dtype)
    return trunc_divide(ctx, input, other, dtype)


@converter(prims.broadcast_in_dim.default, dynamic=True)
def broadcast_in_dim(ctx, a, shape, broadcast_dimensions):
    """Input dim i becomes output dim ``broadcast_dimensions[i]``; the other output dims
    are new (size 1, then broadcast to ``shape``)."""
    a = helpers.itensor(ctx, a)
    sizes = D.dims_of(ctx, a)
    placed = [1] * len(shape)
    for source, target in enumerate(broadcast_dimensions):
        placed[target] = sizes[source]
    x = D.reshape(ctx, a, placed) if len(placed) != len(sizes) else a
    return D.broadcast_to(ctx, x, [D.as_dim(ctx, d) for d in shape])
