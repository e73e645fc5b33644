"""Which boxes of input sizes a compile is split into when the traced graph covers only part
of a declared range (Note [Sizes the trace does not cover] in compiler.py)."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from .inputs import Input
from .runtime.by_size import Box

# At most this many declared sizes of one dim may lie outside the traced range; each is
# compiled on its own. The common case is the one size 1 (a branch on ``size > 1``).
MAX_UNCOVERED = 2


def split(specs: Sequence[Input], covered: Box) -> list[Box] | None:
    """The boxes to compile, first match wins at run time: ``covered`` (the traced sizes),
    then one box per uncovered size of each narrowed dim (other dims as declared). None when
    some dim has more than ``MAX_UNCOVERED`` uncovered sizes."""
    boxes = [dict(covered)]
    for (i, d), (lo, hi) in covered.items():
        declared = range(specs[i].min_shape[d], specs[i].max_shape[d] + 1)
        outside = [v for v in declared if not lo <= v <= hi]
        if len(outside) > MAX_UNCOVERED:
            return None
        boxes += [{(i, d): (v, v)} for v in outside]
    return boxes


def restrict(inputs: Sequence[Any], kwarg_inputs: dict[str, Any],
             box: Box) -> tuple[list[Any], dict[str, Any]]:
    """``inputs``/``kwarg_inputs`` with each Input's dims restricted to ``box`` (input ``i``
    counts positional inputs first, then keyword inputs in order)."""
    values = list(inputs) + list(kwarg_inputs.values())
    for (i, d), (lo, hi) in box.items():
        spec = values[i]
        lows, opts, highs = (list(s) for s in (spec.min_shape, spec.opt_shape, spec.max_shape))
        lows[d], opts[d], highs[d] = lo, min(max(opts[d], lo), hi), hi
        values[i] = dataclasses.replace(spec, shape=None, min_shape=tuple(lows),
                                        opt_shape=tuple(opts), max_shape=tuple(highs))
    n = len(inputs)
    return values[:n], dict(zip(kwarg_inputs, values[n:]))
