"""Is the lowered graph itself wrong? Its float64 run against the model's float64 run, and
the first lowered node whose float64 value disagrees with the captured (pre-lowering)
graph's value for the same original node."""

from __future__ import annotations

import math

import torch
from torch.export import ExportedProgram
from torch.fx import GraphModule, Node

from .. import accuracy
from ..capture import flat_module
from ..settings import CompilationSettings, op_name
from .graphs import cast_graph, cast_value, run_recording
from .report import LoweringDivergence


def check_lowering(ep: ExportedProgram, gm: GraphModule, low64: dict, low64_out,
                   model_p, model64, flat: list, settings: CompilationSettings
                   ) -> LoweringDivergence | None:
    """None when the lowered graph in float64 passes the float64 rule against the model in
    float64 (as if it were a compiled result); else what is wrong and, if it can be
    localized, the first wrong lowered node."""
    bad = []
    outs = accuracy.tensors(low64_out)
    for i, (low, ref, eager) in enumerate(zip(outs, model64, model_p)):
        if not ref.is_floating_point() or low.shape != ref.shape:
            continue
        err = accuracy.rmse(low, ref)
        limit = accuracy.allowed(accuracy.rmse(eager, ref), ref, settings.dtype)
        if math.isnan(err) or err > limit:
            bad.append(f"output {i}: RMSE {err:.3g} > allowed {limit:.3g}")
    if len(outs) != len(model64):
        bad.append(f"the lowered graph returns {len(outs)} tensors, the model {len(model64)}")
    if not bad:
        return None
    route = gm.meta.get("lowering", "?")
    found = LoweringDivergence(route, "the lowered graph run in float64 disagrees with the "
                                      "model run in float64: " + "; ".join(bad))
    try:
        _localize(found, ep, gm, low64, flat, settings)
    except Exception as err:  # localization is best effort; the verdict stands
        found.message += f" (could not localize: {type(err).__name__}: {err})"
    return found


def _localize(found: LoweringDivergence, ep: ExportedProgram, gm: GraphModule, low64: dict,
              flat: list, settings: CompilationSettings) -> None:
    captured = flat_module(ep)
    _, cap64 = run_recording(cast_graph(captured), [cast_value(x, torch.float64) for x in flat],
                             clone=True)
    _, cap_p = run_recording(cast_graph(captured, settings.dtype),
                             [cast_value(x, settings.dtype) for x in flat], clone=True)
    for low, orig in representatives(captured, gm):
        ref, mine, eager = cap64.get(orig.name), low64.get(low.name), cap_p.get(orig.name)
        if not all(isinstance(v, torch.Tensor) for v in (ref, mine, eager)):
            continue
        if not ref.is_floating_point() or ref.shape != mine.shape:
            continue
        err = accuracy.rmse(mine, ref)
        limit = accuracy.allowed(accuracy.rmse(eager, ref), ref, settings.dtype)
        if math.isnan(err) or err > limit:
            found.node, found.original = low.name, orig.name
            found.node_rmse, found.node_allowed = err, limit
            found.op = op_name(orig.target)
            stack = orig.meta.get("nn_module_stack") or {}
            if stack:
                found.module = next(reversed(stack.values()))[0] or ""
            return


def _shape_of(node: Node):
    val = node.meta.get("val")
    return (tuple(val.shape), val.dtype) if isinstance(val, torch.Tensor) else None


def representatives(captured: GraphModule, lowered: GraphModule) -> list[tuple[Node, Node]]:
    """(lowered node, captured node) pairs where the lowered node holds the captured node's
    value, in the lowered graph's order. A node lowering kept has the same name and target;
    a decomposed node's replacements keep its metadata (``torch_fn``: the torch call it came
    from), and the last of them with its shape and dtype holds its value."""
    by_name = {n.name: n for n in captured.graph.nodes if n.op == "call_function"}
    by_call: dict[tuple, Node] = {}  # the last captured node of each torch call
    for n in captured.graph.nodes:
        if n.op == "call_function" and n.meta.get("torch_fn"):
            by_call[tuple(n.meta["torch_fn"])] = n
    lowered_names = {n.name for n in lowered.graph.nodes}
    last: dict[Node, Node] = {}
    for node in lowered.graph.nodes:
        if node.op != "call_function":
            continue
        orig = by_name.get(node.name)
        if orig is not None and orig.target == node.target:
            last[orig] = node
            continue
        if orig is not None or not node.meta.get("torch_fn"):
            continue
        orig = by_call.get(tuple(node.meta["torch_fn"]))
        if orig is not None and orig.name not in lowered_names and \
                _shape_of(orig) is not None and _shape_of(orig) == _shape_of(node):
            last[orig] = node
    order = {n: i for i, n in enumerate(lowered.graph.nodes)}
    return sorted(((low, orig) for orig, low in last.items()), key=lambda p: order[p[0]])

