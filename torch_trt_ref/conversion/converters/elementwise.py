"""Binary elementwise converters (seed table; extended by the converter library)."""

from __future__ import annotations

import torch

from .. import helpers
from .._trt_ops import EW
from ..registry import converter

aten = torch.ops.aten


@converter(aten.add.Tensor, dynamic=True)
def add(ctx, input, other, alpha=1):
    if alpha != 1:
        other = helpers.elementwise(ctx, EW.PROD, other, alpha, ctx.out_dtype)
    return helpers.elementwise(ctx, EW.SUM, input, other, ctx.out_dtype)
