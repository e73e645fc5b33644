"""The ordered lowering pipeline: one line per pass. The graph is linted and recompiled once,
after the last pass: the passes edit the graph, never run the module, and each recompile of a
BERT-sized graph costs ~30 ms, each lint ~1.5 ms (linting after every pass was 7 ms of
BERT-base's 55 ms of lowering, issue 25). An invalid graph names the passes that ran; run
them one by one with ``lower(gm, settings, passes=[...])`` to find the one that broke it.
``SEGMENT_PASSES`` run on each TensorRT segment just before conversion: rewrites for how an
engine stores weights, which must not change what the partitioner counts."""

from __future__ import annotations

from torch.fx import GraphModule

from .. import observe, work
from ..settings import CompilationSettings
from .autocast import autocast, fp32_accumulation
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
    autocast,
    fp32_accumulation,
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
    passes = passes or PASSES
    observer = observe.current()
    for lowering_pass in passes:
        if observer is not None:
            observer.lowering_pass(lowering_pass.__name__, "before", gm)
        gm = lowering_pass(gm, settings)
        if observer is not None:
            observer.lowering_pass(lowering_pass.__name__, "after", gm)
        work.add(f"nodes.{lowering_pass.__name__}", len(gm.graph.nodes))
    try:
        gm.graph.lint()
    except Exception as err:
        names = [p.__name__ for p in passes]
        which = (f"lowering pass {names[0]}" if len(names) == 1 else
                 f"one of the lowering passes {', '.join(names)} (run them one at a time "
                 f"with lower(gm, settings, passes=[...]) to find which)")
        raise RuntimeError(f"{which} left an invalid graph: {err}") from err
    gm.recompile()
    if settings.precision != "fp32" or settings.enable_autocast:
        propagate_meta(gm)
    return gm


def lower_segment(gm: GraphModule, settings: CompilationSettings) -> GraphModule:
    """The ``SEGMENT_PASSES`` on one TensorRT segment (edited in place; recompiled only if a
    pass changed it, as most segments hold no tied weight)."""
    before = [(n.op, n.target) for n in gm.graph.nodes]
    observer = observe.current()
    for segment_pass in SEGMENT_PASSES:
        if observer is not None:
            observer.lowering_pass(segment_pass.__name__, "before", gm)
        gm = segment_pass(gm, settings)
        if observer is not None:
            observer.lowering_pass(segment_pass.__name__, "after", gm)
    if [(n.op, n.target) for n in gm.graph.nodes] != before:
        gm.graph.lint()
        gm.recompile()
    return gm
