"""Compiles whose traced graph covers only part of a declared range: the check of the whole
module at the untraced sizes, and the split into one module per box of sizes (Note [Sizes the
trace does not cover])."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable, Sequence

from .accuracy import judge, to_float64
from .capture import DynamicShapeError, as_inputs, eval_mode
from .inputs import Input
from .runtime.by_size import Box, BySize

log = logging.getLogger(__name__)

# Note [Sizes the trace does not cover]: export traces a dynamic dim at one size (>= 2, Note
# [Tracing dynamic dims] in capture.py), and a model line that branches on the size guards
# the graph to the sizes that take the traced branch: ``if x.shape[0] > 1`` makes the traced
# range 2..max where the user declared 1..max. Compiled for the declared range, the module
# would run size 1 down the branch eager does not take: a silent wrong answer. (For 1..2
# the traced range is the single size 2 and export fails.) Many such branches do not change
# the result: transformers' sdpa ``is_causal = q_length > 1 and ...`` is the same attention
# for one query and one key. So for at most ``MAX_UNCOVERED`` untraced sizes per
# dim (more: a DynamicShapeError), the module compiled for the declared range is checked
# against eager under the float64 rule at each untraced size on random inputs
# (``disagreement``); when it agrees it is the result (one module, deployable
# like any other; ``compile_report.untraced_sizes`` lists what was checked). When it does
# not, or export found a single size, each untraced size is compiled on its own, traced at
# that size so it takes its own branch, and the result (``BySize``) runs the
# module whose sizes hold the input's. A random-input check cannot see a branch whose
# effect no random input shows; such a model should declare its ranges to match its branches.

# At most this many declared sizes of one dim may lie outside the traced range; each is
# compiled on its own. The common case is the one size 1 (a branch on ``size > 1``).
MAX_UNCOVERED = 2


class Uncovered(Exception):
    """Raised by a compile whose traced graph holds for ``covered``, part of the declared
    ranges ((input index, dim) -> (lo, hi)); ``program`` is what it captured."""

    def __init__(self, covered: Box, program):
        super().__init__(str(covered))
        self.covered, self.program = covered, program


def compile_covering(compile_traced: Callable, model, inputs: Sequence[Any],
                     kwarg_inputs: dict[str, Any]):
    """``compile_traced(model, inputs, kwarg_inputs, captured=None)``, which raises
    ``Uncovered`` (or DynamicShapeError with its ``dims``), made to cover every declared size:
    one module (built from the program already captured) checked against eager at the
    untraced sizes, else ``BySize``."""
    try:
        return compile_traced(model, inputs, kwarg_inputs)
    except Uncovered as uncovered:
        covered, program = uncovered.covered, uncovered.program
    except DynamicShapeError as err:  # the trace covers one size of these dims
        covered = {(i, d): (size, size) for i, d, size in err.dims}
        if not covered:
            raise
        try:
            return _by_size(compile_traced, model, inputs, kwarg_inputs, covered)
        except Exception as branch_err:  # the model really forces the size: say so
            raise err from branch_err
    boxes = split(as_inputs(list(inputs)) + as_inputs(list(kwarg_inputs.values())), covered)
    if boxes is not None:  # one module for every size, if it is right at the untraced ones
        whole = compile_traced(model, inputs, kwarg_inputs, captured=program)
        why = disagreement(model, whole, inputs, kwarg_inputs, boxes[1:])
        if why is None:
            whole.compile_report.untraced_sizes = describe(boxes[1:])
            return whole
        log.info("compiling per size: the graph traced for %s is wrong elsewhere: %s",
                 covered, why)
    return _by_size(compile_traced, model, inputs, kwarg_inputs, covered)


def _by_size(compile_traced, model, inputs, kwarg_inputs, covered: Box) -> BySize:
    specs = as_inputs(list(inputs)) + as_inputs(list(kwarg_inputs.values()))
    boxes = split(specs, covered)
    if boxes is None:
        dims = ", ".join(f"input {i} dim {d} ({specs[i].min_shape[d]}..{specs[i].max_shape[d]} "
                         f"declared, {lo}..{hi} traced)" for (i, d), (lo, hi) in covered.items())
        raise DynamicShapeError(
            f"the model branches on the size of {dims}: its graph holds only for the traced "
            "sizes. Declare those ranges, or compile the other sizes separately.")
    branches = []
    for box in boxes:
        box_inputs, box_kwargs = restrict(inputs, kwarg_inputs, box)
        branches.append((box, compile_covering(compile_traced, model, box_inputs, box_kwargs)))
    report = branches[0][1].compile_report
    report.size_branches = [{"sizes": sizes, "counts": module.compile_report.counts}
                            for sizes, (_, module) in zip(describe(boxes), branches)]
    return BySize(branches, list(range(len(inputs))) + list(kwarg_inputs))


def describe(boxes: list[Box]) -> list[dict]:
    return [{f"input {i} dim {d}": [lo, hi] for (i, d), (lo, hi) in box.items()}
            for box in boxes]


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
    return _unflat(values, inputs, kwarg_inputs)


def _unflat(values: list, inputs: Sequence[Any], kwarg_inputs: dict[str, Any]):
    """``values`` (positional inputs, then keyword inputs in order) split back."""
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
    return _unflat(values, inputs, kwarg_inputs)
