"""``lower_program``: an ExportedProgram -> the flat, lowered GraphModule every later phase
takes (the node-by-node route, else the whole-program one, then the pass pipeline); and
``lowered``: any graph a user hands the support query, lowered the same way."""

from __future__ import annotations

import inspect
import logging
from typing import Any

import torch
from torch.export import Dim, ExportedProgram
from torch.fx import GraphModule
from torch.utils._pytree import tree_unflatten

from ..capture import export_program
from ..settings import CompilationSettings, op_name
from .decompositions import DecompositionLookup, NotLocallyLowerable, decomposition_table
from .pipeline import lower
from .routes import node_by_node, whole_program

log = logging.getLogger(__name__)


def lower_program(ep: ExportedProgram, settings: CompilationSettings) -> GraphModule:
    """Decompose the exported program and run the lowering passes; returns a flat
    GraphModule (weights as get_attr) with the original calling convention.

    The program's graph is copied, its in-place ops made out-of-place and the nodes the
    decomposition table covers retraced one by one (``decompose_locally``). A program this
    cannot handle (a write to an input, a weight or a view another node observes; a
    higher-order op such as cond; a node that fails to trace) is retraced whole by
    ``ExportedProgram.run_decompositions`` instead. ``gm.meta["lowering"]`` says which."""
    try:  # the table is made only if a node is traced (Note [Lookup before the table])
        gm = node_by_node(ep, DecompositionLookup(settings))
        route = "node by node"
    except Exception as err:  # the whole-program route is slower but always correct
        level = logging.DEBUG if isinstance(err, NotLocallyLowerable) else logging.INFO
        log.log(level, "lowering with run_decompositions: %s: %s", type(err).__name__, err)
        gm = whole_program(ep, decomposition_table(settings))
        route = f"whole program (run_decompositions), because {err}"
    gm.meta["lowering"] = route
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            node.meta.setdefault("param_name", node.target)
    return lower(gm, settings)


def lowered(graph: Any, settings: CompilationSettings) -> tuple[GraphModule, str | None]:
    """``graph`` lowered as ``compile`` lowers it, and a note saying so; a graph that is
    lowered already (``meta["lowering"]`` set, or no node the decomposition table covers)
    comes back as it is, with no note."""
    if isinstance(graph, ExportedProgram):
        return lower_program(graph, settings), ("lowered the ExportedProgram first, as "
                                                "compile does")
    if not isinstance(graph, GraphModule):
        raise TypeError(f"expected a torch.fx.GraphModule or an ExportedProgram, got "
                        f"{type(graph).__name__}")
    table = DecompositionLookup(settings)
    if "lowering" in graph.meta or not any(
            n.op == "call_function" and n.target in table for n in graph.graph.nodes):
        return graph, None
    ops = sorted({op_name(n.target) for n in graph.graph.nodes
                  if n.op == "call_function" and n.target in table})
    note = (f"the graph was not lowered ({', '.join(ops[:4])}{', ...' if len(ops) > 4 else ''}"
            " are decomposed by compile): exported again and lowered first, as compile does")
    return lower_program(_reexport(graph), settings), note


def _reexport(gm: GraphModule):
    """torch.export ``gm`` (e.g. ``ep.module()``) again on example values made from its
    placeholders' fake values; dims that were symbolic stay dynamic (Dim.AUTO)."""
    examples, dims = [], []
    for node in (n for n in gm.graph.nodes if n.op == "placeholder"):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise ValueError(f"cannot lower this graph: placeholder {node.name} has no example "
                             "value (meta['val']). Pass the ExportedProgram, ep.module(), or "
                             "a graph from torch_trt_ref.lowering.lower_program")
        shape = [d if isinstance(d, int) else (d.node.hint or 2) for d in val.shape]
        examples.append(torch.rand(shape).to(val.dtype) if val.dtype.is_floating_point
                        else torch.zeros(shape, dtype=val.dtype))
        dims.append({i: Dim.AUTO for i, d in enumerate(val.shape) if not isinstance(d, int)}
                    or None)
    spec = getattr(gm, "_in_spec", None)
    if spec is None:
        args, kwargs, dyn_args, dyn_kwargs = tuple(examples), {}, tuple(dims), {}
    else:
        (args, kwargs), (dyn_args, dyn_kwargs) = (tree_unflatten(examples, spec),
                                                  tree_unflatten(dims, spec))
    bound = inspect.signature(gm.forward).bind(*dyn_args, **dyn_kwargs).arguments
    dynamic = dict(bound) if any(d is not None for d in dims) else None
    return export_program(gm, args, kwargs, dynamic)
