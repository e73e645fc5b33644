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


def disagreement(model, compiled, inputs: Sequence[Any], kwarg_inputs: dict[str, Any],
                 boxes: list[Box], seeds: Sequence[int] = (0, 1)) -> str | None:
    """None when ``compiled`` (built from a trace that does not cover ``boxes``) equals eager
    under the float64 rule (torch_trt_ref.accuracy) at each box's sizes, other dims at opt,
    on random inputs of each seed; else why not (an error counts as a disagreement)."""
    import copy

    import torch

    try:
        model64 = copy.deepcopy(model).double()
        with torch.random.fork_rng(devices=[]):  # the caller's random state stays as it was
            return _disagreement(model, model64, compiled, inputs, kwarg_inputs, boxes, seeds)
    except Exception as err:  # noqa: BLE001  (any failure means: do not trust the trace)
        return f"{type(err).__name__}: {err}"


def _disagreement(model, model64, compiled, inputs, kwarg_inputs, boxes, seeds) -> str | None:
    import torch

    from .accuracy import judge, to_float64
    from .capture import eval_mode

    for box in boxes:
        for seed in seeds:
            torch.manual_seed(seed)
            args, kwargs = _examples(inputs, kwarg_inputs, box)
            with torch.no_grad(), eval_mode(model), eval_mode(model64):
                verdict = judge(compiled(*args, **kwargs), model(*args, **kwargs),
                                model64(*to_float64(args), **to_float64(kwargs)))
            if not verdict.passed:
                return f"at {box}: {verdict.message}"
    return None


def _examples(inputs, kwarg_inputs, box: Box) -> tuple[list, dict]:
    """Example tensors: each Input at its opt shape with ``box``'s dims set to their size."""
    values = list(inputs) + list(kwarg_inputs.values())
    for i, value in enumerate(values):
        if isinstance(value, Input):
            shape = list(value.opt_shape)
            for (j, d), (size, _) in box.items():
                if j == i:
                    shape[d] = size
            values[i] = value.example(shape)
    n = len(inputs)
    return values[:n], dict(zip(kwarg_inputs, values[n:]))
