"""The ranges of the symbols torch.export made for dynamic dims: ``symbol_ranges`` maps
each symbol of a captured graph back to the (min, opt, max) of its ``Input`` (how every
later phase knows the range of any intermediate shape), and ``traced_ranges`` finds the
declared-dynamic dims whose traced graph holds on a narrower range than declared
(``dynamic_input_sizes`` walks those dims: size_conditions.py uses it too)."""

from __future__ import annotations

from typing import Sequence

import sympy
import torch
from torch.export import ExportedProgram
from torch.utils._sympy.numbers import int_oo

from .inputs import Input


def symbol_ranges(gm: torch.fx.GraphModule, specs: Sequence[Input]) -> dict:
    """Map each export symbol to (min, opt, max) by matching placeholder dims to Inputs."""
    ranges: dict[sympy.Symbol, tuple[int, int, int]] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, spec in zip(placeholders, specs):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for d, size in enumerate(val.shape):
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                new = (spec.min_shape[d], spec.opt_shape[d], spec.max_shape[d])
                old = ranges.get(size.node.expr, new)  # equal dims: intersect the ranges
                lo, hi = max(old[0], new[0]), min(old[2], new[2])
                ranges[size.node.expr] = (lo, min(max(new[1], lo), hi), hi)
    return ranges


def profile_symbol_ranges(gm: torch.fx.GraphModule, specs: Sequence[Input]) -> tuple:
    """``symbol_ranges`` of each optimization profile when some input declares several
    (``Input(profiles=...)``), else (). Inputs that declare several must agree on how many;
    the others hold in every profile."""
    counts = {spec.profile_count for spec in specs if spec.profiles}
    if not counts:
        return ()
    if len(counts) > 1:
        raise ValueError(
            "Input(profiles=...): every input that declares profiles must declare the same "
            f"number of them, got {sorted(counts)} "
            f"({[spec.describe() for spec in specs if spec.profiles]})")
    return tuple(symbol_ranges(gm, [spec.profile(k) for spec in specs])
                 for k in range(counts.pop()))


def dynamic_input_sizes(ep: ExportedProgram, specs: Sequence[Input]):
    """(input index, input name, spec, dim, traced size) of each declared-dynamic dim of the
    program's tensor inputs."""
    nodes = {n.name: n for n in ep.graph.find_nodes(op="placeholder")}
    for i, (name, spec) in enumerate(zip(ep.graph_signature.user_inputs, specs)):
        val = nodes[name].meta.get("val")
        if isinstance(val, torch.Tensor):
            for d in spec.dynamic_dims:
                yield i, name, spec, d, val.shape[d]


def traced_ranges(ep: ExportedProgram, specs: Sequence[Input]) -> dict:
    """(input index, dim) -> (lo, hi) for every declared-dynamic dim whose traced graph holds
    on a narrower range than declared: the model branched on the size (``if x.shape[0] > 1``
    added the guard ``s0 >= 2``; Note [Sizes the trace does not cover] in size_cover.py)."""
    narrowed = {}
    for i, _, spec, d, size in dynamic_input_sizes(ep, specs):
        if not (isinstance(size, torch.SymInt) and size.node.expr in ep.range_constraints):
            continue  # a symbol export replaced by an expression or a constant
        sym, vr = size.node.expr, ep.range_constraints[size.node.expr]
        lo = max(int(vr.lower), spec.min_shape[d])
        hi = spec.max_shape[d] if vr.upper == int_oo else min(int(vr.upper),
                                                               spec.max_shape[d])
        # range_constraints miss a guard such as Ne(s0, 1) (torchvision ViT's attention
        # adds it under size-oblivious tracing; lowering's retrace then specializes a
        # 1..2 range to 2): the ends must satisfy the shape env's guards on the symbol
        guards = [g.expr for g in size.node.shape_env.guards
                  if g.expr.free_symbols == {sym}]
        while lo < hi and not _holds(guards, sym, lo):
            lo += 1
        while hi > lo and not _holds(guards, sym, hi):
            hi -= 1
        if (lo, hi) != (spec.min_shape[d], spec.max_shape[d]):
            narrowed[(i, d)] = (lo, hi)
    return narrowed


def _holds(guards: list, sym: sympy.Symbol, value: int) -> bool:
    """Every guard is true at ``sym = value`` (one sympy cannot decide counts as true)."""
    for guard in guards:
        result = guard.subs(sym, value)
        if result in (sympy.false, False):
            return False
    return True
