"""The ordered lowering pipeline: one line per pass. The graph is linted after each pass, so
a pass that leaves it invalid is named at once, and recompiled once at the end: the passes
edit the graph, never run the module, and each recompile of a BERT-sized graph costs ~30 ms.
``SEGMENT_PASSES`` run on each TensorRT segment just before conversion: rewrites for how an
engine stores weights, which must not change what the partitioner counts."""

from __future__ import annotations

from torch.fx import GraphModule

from .. import work
from ..settings import CompilationSettings
from .meta import propagate_meta
from .passes import fold_constants, remove_asserts, remove_noops, split_tied_embeddings
from .precision import cast_precision
from .views import remove_noop_views

PASSES = [
    remove_asserts,
    remove_noops,
    remove_noop_views,
    fold_constants,
    cast_precision,
]
# Note [Engine-only rewrites after partitioning]: split_tied_embeddings turns one embedding
# into 8 nodes and one head into 6; run before partitioning it made GPT-2's lookup a TensorRT
# block of its own (issue 25). It only matters when the lookup and the head share an engine.
SEGMENT_PASSES = [
    split_tied_embeddings,
    fold_constants,
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


def lower_segment(gm: GraphModule, settings: CompilationSettings) -> GraphModule:
    """The ``SEGMENT_PASSES`` on one TensorRT segment (edited in place; recompiled only if a
    pass changed it, as most segments hold no tied weight)."""
    before = [(n.op, n.target) for n in gm.graph.nodes]
    for segment_pass in SEGMENT_PASSES:
        gm = segment_pass(gm, settings)
    if [(n.op, n.target) for n in gm.graph.nodes] != before:
        gm.graph.lint()
        gm.recompile()
    return gm
