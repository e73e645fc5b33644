"""Padding converters. Every padding mode is one ISliceLayer that starts at -pre and reads
past the edges: FILL mode for constant padding, REFLECT for reflection, CLAMP for
replication and WRAP for circular padding. Negative pads crop (see ``pad_slice``)."""

from __future__ import annotations

import torch

from .. import dims as D
from .. import helpers
from ..blocks.shape import MODE, pad_slice
from ..registry import converter

aten = torch.ops.aten


@converter(aten.constant_pad_nd.default, dynamic=True)
@D.itensor_input
def constant_pad_nd(ctx, input, pad, value=0):
    fill = bool(value) if helpers.dtype_of(input) == torch.bool else value
    return pad_slice(ctx, input, pad, MODE.FILL, fill=fill)


def _register(targets, mode):
    @converter(*targets, dynamic=True)
    @D.itensor_input
    def convert(ctx, input, padding):
        return pad_slice(ctx, input, padding, mode)


_register((aten.reflection_pad1d.default, aten.reflection_pad2d.default,
           aten.reflection_pad3d.default), MODE.REFLECT)
_register((aten.replication_pad1d.default, aten.replication_pad2d.default,
           aten.replication_pad3d.default), MODE.CLAMP)


@converter(aten._pad_circular.default, dynamic=True)
@D.itensor_input
def pad_circular(ctx, input, pad):
    return pad_slice(ctx, input, pad, MODE.WRAP)
