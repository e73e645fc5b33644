"""Activation converters (seed; extended by the converter library)."""

from __future__ import annotations

import torch

from .. import helpers
from .._trt_ops import ACT
from ..registry import converter

aten = torch.ops.aten


@converter(aten.relu.default, dynamic=True)
def relu(ctx, input):
    return helpers.activation(ctx, ACT.RELU, input)
