"""The ordered lowering pipeline: one line per pass; the graph is linted and recompiled
after each so every pass leaves a valid, callable module."""

from __future__ import annotations

from torch.fx import GraphModule

from ..settings import CompilationSettings
from .meta import propagate_meta
from .passes import fold_constants, remove_asserts, remove_noops
from .precision import cast_precision

PASSES = [
    remove_asserts,
    remove_noops,
    fold_constants,
    cast_precision,
]


def lower(gm: GraphModule, settings: CompilationSettings, passes=None) -> GraphModule:
    for lowering_pass in passes or PASSES:
        gm = lowering_pass(gm, settings)
        gm.graph.lint()
        gm.recompile()
    if settings.precision != "fp32":
        propagate_meta(gm)
    return gm
