"""Conditions over several input sizes that a traced graph holds under (Note [Conditions over
several sizes]): found at capture, checked by the compiled module at every call."""

from __future__ import annotations

import itertools
from typing import Sequence

import sympy
import torch
from torch.export import ExportedProgram
from torch.utils._sympy.printers import PythonPrinter

from .inputs import Input
from .ranges import dynamic_input_sizes

# Note [Conditions over several sizes]: a model line can tie several declared-dynamic sizes
# together: ``native_group_norm(x, w, b, N=5, C=4, HxW=16, ...)`` with N and HxW taken from
# one example holds only where x.numel() == 5*4*16, and eager raises at every other size.
# Export guards that (``Eq(4*s0*s1, 320)``) without narrowing any one dim's range (so
# ``ranges.traced_ranges`` cannot see it), and under size-oblivious tracing it does not
# even refuse the declared range: the compiled module ran at every declared size, where
# lowering's decomposition failed (``shape '[5, 1, 4, 4]' is invalid for input of size
# 4*s53*s77``) or the converter returned numbers eager never gives. Each guard over two or
# more input sizes that fails somewhere in the declared box (at a corner or at opt) becomes
# a check of the compiled module (``runtime.size_guard.SizeGuard``): it raises at sizes where
# the traced graph does not hold, as eager raises or takes another path there, and compile
# warns naming the condition.


def size_conditions(ep: ExportedProgram, specs: Sequence[Input]) -> list[tuple[str, dict]]:
    """(Python condition, {symbol: (input index, input name, dim)}) for each guard over two or
    more declared-dynamic input dims that is false somewhere in the declared ranges."""
    where, ranges, env = {}, {}, None
    for i, name, spec, d, size in dynamic_input_sizes(ep, specs):
        if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
            env = size.node.shape_env
            where.setdefault(size.node.expr, (i, name, d))
            ranges.setdefault(size.node.expr, (spec.min_shape[d], spec.opt_shape[d],
                                               spec.max_shape[d]))
    if len(where) < 2 or env is None:
        return []
    found = []
    for guard in env.guards:
        symbols = sorted(guard.expr.free_symbols, key=str)
        if len(symbols) < 2 or not set(symbols) <= where.keys():
            continue
        corners = itertools.product(*[(ranges[s][0], ranges[s][2]) for s in symbols])
        points = [*corners, tuple(ranges[s][1] for s in symbols)]
        if any(guard.expr.subs(dict(zip(symbols, p))) in (sympy.false, False) for p in points):
            found.append((PythonPrinter().doprint(guard.expr),
                          {str(s): where[s] for s in symbols}))
    return found


def describe(conditions: list[tuple[str, dict]]) -> str:
    return "; ".join(
        f"{code} with " + ", ".join(f"{s} = input {name!r} dim {d}"
                                    for s, (_, name, d) in sizes.items())
        for code, sizes in conditions)
