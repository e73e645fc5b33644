"""Padding converters. Every padding mode is one ISliceLayer that starts at -pre and reads
past the edges: FILL mode for constant padding, REFLECT for reflection, CLAMP for
replication and WRAP for circular padding. Negative pads crop (see ``pad_slice``)."""

from __future__ import annotations

import torch

from ..._trt import trt
from .. import dims as D
from .. import helpers
from ..registry import converter

aten = torch.ops.aten
MODE = trt.SampleMode


def pad_slice(ctx, x, pad, mode, fill=None):
    """``pad`` lists (pre, post) pairs from the last dim backwards, as in torch. With
    negative pads, circular padding wraps around the cropped tensor while reflection and
    replication index the whole input (F.pad(arange(6), (-2, 3)) is [2, 3, 4, 5, 2, 3, 4]
    circular, [2, 3, 4, 5, 4, 3, 2] reflect, [2, 3, 4, 5, 5, 5, 5] replicate): one slice
    starting at -pre does the latter."""
    if any(p < 0 for p in pad) and any(p > 0 for p in pad) and mode == MODE.WRAP:
        x = pad_slice(ctx, x, [min(p, 0) for p in pad], None)
        pad = [max(p, 0) for p in pad]
    sizes = D.dims_of(ctx, x)
    rank = len(sizes)
    start = [0] * rank
    for k in range(len(pad) // 2):
        d = rank - 1 - k
        pre, post = pad[2 * k], pad[2 * k + 1]
        start[d] = -pre
        sizes[d] = D.dim_op(ctx, "add", sizes[d], pre + post)
    return D.slice_nd(ctx, x, start, sizes, [1] * rank, mode=mode, fill=fill)


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
