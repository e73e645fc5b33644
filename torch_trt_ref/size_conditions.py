"""Conditions over several input sizes that a traced graph holds under (Note [Conditions over
several sizes]): found at capture with the declared sizes where each fails, which size cover
runs in eager and covers (size_cover.py)."""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import sympy
import torch
from torch.export import ExportedProgram
from torch.utils._sympy.printers import PythonPrinter

from .inputs import Input
from .ranges import dynamic_input_sizes

# Note [Conditions over several sizes]: a model line can tie several declared-dynamic sizes
# together. ``native_group_norm(x, w, b, N=5, C=4, HxW=4, ...)`` with N and HxW taken from
# one example holds only where x.numel() == 5*4*4, and eager raises at every other size;
# export guards that (``Eq(4*s0*s1, 80)``) without narrowing any one dim's range (so
# ``ranges.traced_ranges`` cannot see it). A 3-d convolution traced size-oblivious is
# guarded by ``(s2*s3*s4) != 1``: at spatial size 1x1x1 torch takes another path, and eager
# runs there. Each guard over two or more input sizes is evaluated over the grid of the
# declared ranges of its sizes (at most ``MAX_GRID`` points; past that at the corners and
# opt only, and the points where it fails are not listed); size cover then runs eager at
# each point where it fails: where eager raises, the compiled module raises as eager does;
# where eager runs, the module traced under the condition is checked there against eager,
# or the point is compiled on its own (Note [Sizes the trace does not cover] in
# size_cover.py). Before that, the compiled module refused every such size (issue 36).

# The most grid points a condition is evaluated at to list the sizes where it fails.
MAX_GRID = 1 << 20
# ... and at most this many where the condition cannot be evaluated on numpy arrays.
MAX_LOOPED = 1 << 16
# torch's sympy functions on numpy arrays (sympy.lambdify), for listing where a guard fails
NUMPY_NAMES = {"FloorDiv": np.floor_divide, "PythonMod": np.mod,
               "Max": lambda *a: functools.reduce(np.maximum, a),
               "Min": lambda *a: functools.reduce(np.minimum, a)}
# What a condition's code may call (PythonPrinter prints sympy's Max as ``max(...)``).
NAMES = {"__builtins__": {}, "math": math, "max": max, "min": min, "abs": abs}


def holds(code, values: dict[str, int]) -> bool:
    """Whether a condition's ``code`` (a string or compiled) is true at the sizes
    ``values`` ({symbol: size})."""
    return bool(eval(code, dict(NAMES), values))  # noqa: S307  (our own printed sympy)


@dataclass(frozen=True)
class Condition:
    """A guard over several declared-dynamic input sizes: ``code`` is a Python expression
    over ``sizes``' symbols ({symbol: (input index, input name, dim)}; see
    ``holds``). ``failing``: the declared sizes (one tuple per point, in
    ``sizes``' order) where it is false; None when the grid was too large to list them."""

    code: str
    sizes: dict
    failing: tuple[tuple[int, ...], ...] | None

    @property
    def dims(self) -> list[tuple[int, int]]:
        """(input index, dim) of each symbol, in ``sizes``' order."""
        return [(i, d) for i, _, d in self.sizes.values()]


def size_conditions(ep: ExportedProgram, specs: Sequence[Input]) -> list[Condition]:
    """Each guard over two or more declared-dynamic input dims that is false somewhere in
    the declared ranges."""
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
        code = PythonPrinter().doprint(guard.expr)
        failing = _failing(guard.expr, code, symbols, [ranges[s] for s in symbols])
        if failing is None:  # too many points to list: is it false at a corner or at opt?
            corners = itertools.product(*[(ranges[s][0], ranges[s][2]) for s in symbols])
            points = [*corners, tuple(ranges[s][1] for s in symbols)]
            if not any(guard.expr.subs(dict(zip(symbols, p))) in (sympy.false, False)
                       for p in points):
                continue
        elif not failing:
            continue
        found.append(Condition(code, {str(s): where[s] for s in symbols}, failing))
    return found


def _failing(guard, code: str, symbols: list, ranges: list[tuple[int, int, int]]):
    """The points of the grid of ``ranges`` ((min, opt, max) per symbol) where ``guard`` (its
    Python ``code``) is false, in lexicographic order; None when the grid has more than
    MAX_GRID points, or more than MAX_LOOPED where it cannot be evaluated on numpy arrays."""
    axes = [np.arange(lo, hi + 1) for lo, _, hi in ranges]
    size = math.prod(len(a) for a in axes)
    if size > MAX_GRID:
        return None
    grids = np.meshgrid(*axes, indexing="ij")
    try:  # the whole grid at once
        function = sympy.lambdify(symbols, guard, modules=[NUMPY_NAMES, "numpy"])
        held = np.broadcast_to(np.asarray(function(*grids), dtype=bool), grids[0].shape)
    except Exception:  # noqa: BLE001  (a function numpy lacks: one point at a time)
        if size > MAX_LOOPED:
            return None
        compiled = compile(code, "<size condition>", "eval")
        held = np.empty(grids[0].shape, dtype=bool)
        for index in np.ndindex(*held.shape):
            held[index] = holds(compiled, {str(s): int(g[index]) for s, g in zip(symbols, grids)})
    return tuple(tuple(int(g[index]) for g in grids) for index in zip(*np.nonzero(~held)))


def describe(conditions: list[Condition]) -> str:
    return "; ".join(
        f"{c.code} with " + ", ".join(f"{s} = input {name!r} dim {d}"
                                      for s, (_, name, d) in c.sizes.items())
        for c in conditions)
