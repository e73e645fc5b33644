"""The ordered lowering pipeline: one line per pass. The graph is linted after each pass, so
a pass that leaves it invalid is named at once, and recompiled once at the end: the passes
edit the graph, never run the module, and each recompile of a BERT-sized graph costs ~30 ms."""

from __future__ import annotations

from torch.fx import GraphModule

from .. import work
from ..settings import CompilationSettings
from .meta import propagate_meta
from .passes import fold_constants, remove_asserts, remove_noops, split_tied_embeddings
from .precision import cast_precision

PASSES = [
    remove_asserts,
    remove_noops,
    split_tied_embeddings,
    fold_constants,
    cast_precision,
]


def lower(gm: GraphModule, settings: CompilationSettings, passes=None) -> GraphModule:
    work.add("nodes.decomposed", len(gm.graph.nodes))
    for lowering_pass in passes or PASSES:
        gm = lowering_pass(gm, settings)
        work.add(f"nodes.{lowering_pass.__name__}", len(gm.graph.nodes))
        try:
            gm.graph.lint()
        except Exception as err:
            raise RuntimeError(f"lowering pass {lowering_pass.__name__} left an invalid "
                               f"graph: {err}") from err
    gm.recompile()
    if settings.precision != "fp32":
        propagate_meta(gm)
    return gm
