"""The decomposition registry (seed 001): our own decompositions plus torch's built-in
ones, adjustable through ``enabled_decompositions`` / ``disabled_decompositions``."""

from __future__ import annotations

from typing import Callable

import torch
from torch._decomp import get_decompositions

from ..settings import CompilationSettings, matches_op

aten = torch.ops.aten

DECOMPOSITIONS: dict[torch._ops.OpOverload, Callable] = {}


def register_decomposition(*ops, registry: dict | None = None):
    """Register ``fn`` as the decomposition of each op (overloads or packets)."""

    def wrap(fn):
        for op in ops:
            overloads = [getattr(op, o) for o in op.overloads()] \
                if isinstance(op, torch._ops.OpOverloadPacket) else [op]
            for overload in overloads:
                (DECOMPOSITIONS if registry is None else registry)[overload] = fn
        return fn

    return wrap


# Ops we keep whole although torch would decompose them: a converter exists and the
# decomposition would be slower or less precise in TensorRT.
KEEP = {aten.native_layer_norm.default, aten.gelu.default,
        # one IResizeLayer instead of index arithmetic and gathers
        aten.upsample_nearest1d.vec, aten.upsample_nearest3d.vec,
        aten._upsample_nearest_exact1d.vec, aten._upsample_nearest_exact2d.vec,
        aten._upsample_nearest_exact3d.vec, aten.upsample_linear1d.vec,
        aten.upsample_trilinear3d.vec, aten.upsample_bicubic2d.vec,
        # one ISliceLayer (REFLECT / CLAMP / WRAP sample mode) instead of index gathers
        aten.reflection_pad1d.default, aten.reflection_pad2d.default,
        aten.reflection_pad3d.default, aten.replication_pad1d.default,
        aten.replication_pad2d.default, aten.replication_pad3d.default,
        aten._pad_circular.default, aten.roll.default}


def decomposition_table(settings: CompilationSettings) -> dict:
    """torch's default (core ATen) table, minus ``KEEP`` and ``disabled_decompositions``,
    plus ``enabled_decompositions`` from torch's full table, plus ours."""
    table = dict(torch.export.default_decompositions())
    for op in list(table):
        if op in KEEP or matches_op(op, settings.disabled_decompositions):
            del table[op]
    if settings.enabled_decompositions:
        extra = [getattr(torch.ops, n.split(".")[0]).__getattr__(n.split(".")[1])
                 for n in settings.enabled_decompositions]
        table.update(get_decompositions(extra))
    for op, fn in DECOMPOSITIONS.items():
        if not matches_op(op, settings.disabled_decompositions):
            table[op] = fn
    return table


@register_decomposition(aten.linear.default)
def linear(x, weight, bias=None):
    out = torch.matmul(x, weight.t())
    return out if bias is None else out + bias
