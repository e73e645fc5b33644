"""Compiles whose traced graph covers only part of a declared range: the check of the whole
module at the untraced sizes, and the split into one module per box of sizes (Note [Sizes the
trace does not cover])."""

from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import Any, Callable, Sequence

import torch

from .accuracy import judge, to_float64
from .capture import DynamicShapeError, as_inputs, eval_mode
from .inputs import Input
from .runtime.by_size import Box, BySize
from .size_conditions import Condition
from .size_conditions import describe as describe_conditions

log = logging.getLogger(__name__)

# Note [Sizes the trace does not cover]: export traces a dynamic dim at one size (>= 2, Note
# [Tracing dynamic dims] in capture.py), and a model line that branches on the size guards
# the graph to the sizes that take the traced branch: ``if x.shape[0] > 1`` makes the traced
# range 2..max where the user declared 1..max. Compiled for the declared range, the module
# would run size 1 down the branch eager does not take: a silent wrong answer. (For 1..2
# the traced range is the single size 2 and export fails.) So eager runs the model once at
# each untraced size (other dims at opt, else min, else max; ``eager_error``): a size where
# eager raises at all three (a reflection pad wider than the input, a pooling window larger
# than it, ``view(2, 2, -1)`` of an odd size) is not a size to cover: the compiled module
# raises there too, as eager does (``BySize.raises``), and a warning names the sizes at
# compile time. Many branches at the sizes left do not change the result: transformers'
# sdpa ``is_causal = q_length > 1 and ...`` is the same attention for one query and one
# key. So for at most ``MAX_CHECKED`` such sizes per dim, the module compiled for the
# declared range (less the raising sizes at its ends) is checked against eager under the
# float64 rule at each of them on random inputs (``disagreement``); when it agrees it is the
# result (one module, deployable like any other; ``compile_report.untraced_sizes`` lists
# what was checked). When it does not, there are more sizes, or export found a single size,
# each run of consecutive untraced sizes is compiled on its own, traced inside the run so it
# takes its own branch (and split again where that trace covers part of the run), and the
# result (``BySize``) runs the module whose sizes hold the input's. A random-input check
# cannot see a branch whose effect no random input shows; such a model should declare its
# ranges to match its branches. A dim whose only size eager runs is the traced one is a
# DynamicShapeError, as export says (the model fixes that size), unless eager raises at the
# declared opt (Note [Tracing where eager runs] in capture.py). The declared sizes where a
# condition over several sizes fails (Note [Conditions over several sizes]) are untraced
# sizes too: run in eager (``off_conditions``, at most MAX_PROBED per condition), checked or
# compiled per box of sizes, the traced module guarded by its conditions (``BySize.guards``).

# At most this many untraced sizes of one dim are checked against the module compiled for
# the whole range; more are compiled per run of sizes. Common: the one size 1 (``size > 1``).
MAX_CHECKED = 8
# A dim the model fixes (a DynamicShapeError: a Python loop over the size, a reshape to a
# constant) is compiled once per size where eager runs, at most this many sizes; past them
# the compile stops at once with the error, naming the dim and the model line (a Mamba
# without its kernels loops over the sequence: 25 sequence sizes were 25+ nested compiles
# that ran for many minutes, issue 36 item 7).
MAX_FORCED = 8
# Eager is run at most at this many untraced sizes of one dim to find where it raises; the
# sizes past them are compiled (a trace at a size eager rejects fails the compile).
MAX_PROBED = 64


class Uncovered(Exception):
    """Raised by a compile whose traced graph holds for ``covered``, part of the declared
    ranges ((input index, dim) -> (lo, hi)), and where ``conditions`` over several sizes
    hold (size_conditions.Condition); ``program`` is what it captured."""

    def __init__(self, covered: Box, program, conditions: Sequence[Condition] = ()):
        super().__init__(str(covered))
        self.covered, self.program, self.conditions = covered, program, list(conditions)


def compile_covering(compile_traced: Callable, model, inputs: Sequence[Any],
                     kwarg_inputs: dict[str, Any]):
    """``compile_traced(model, inputs, kwarg_inputs, captured=None)``, which raises
    ``Uncovered`` (or DynamicShapeError with its ``dims``), made to cover every declared size
    at which eager runs: one module (built from the program already captured) checked
    against eager at the untraced sizes, else ``BySize``; both raise where eager raises."""
    static, conditions = None, []
    try:
        return compile_traced(model, inputs, kwarg_inputs)
    except Uncovered as uncovered:
        covered, program = uncovered.covered, uncovered.program
        conditions = uncovered.conditions
    except DynamicShapeError as err:  # the trace covers one size of these dims
        covered, program, static = {(i, d): (size, size) for i, d, size in err.dims}, None, err
        if not covered:
            raise
    # a dim the model fixes is compiled once per size: past MAX_FORCED sizes, say so instead
    sizes, raises = untraced(model, inputs, kwarg_inputs, covered,
                             enough=None if static is None else MAX_FORCED + 1)
    if static is not None and sum(len(v) for v in sizes.values()) > MAX_FORCED:
        raise _too_many_sizes(static, sizes)
    points, off_raises, unprobed = off_conditions(model, inputs, kwarg_inputs, covered,
                                                  conditions)
    raises += off_raises
    if static is not None and not any(sizes.values()) and static.traced_at == "opt_shape":
        raise static  # eager runs at no other size: the model really forces the size
    if raises:
        fixed = "" if static is None else f" Export says: {static}"
        warnings.warn(f"the model raises in eager at declared sizes {describe(raises)} "
                      f"({raises[0][1]}); the compiled module raises there too.{fixed}",
                      stacklevel=3)
    if unprobed:
        warnings.warn(f"the model's graph holds only where {describe_conditions(unprobed)}, "
                      f"which fails at more declared sizes than are run in eager "
                      f"({MAX_PROBED}); the compiled module raises at those sizes",
                      stacklevel=3)
    guards = [(c.code, c.sizes) for c in unprobed]
    if (program is not None and all(len(v) <= MAX_CHECKED for v in sizes.values())
            and len(points) <= MAX_CHECKED and not (guards and points)):
        # one module for every size eager runs, if it is right at the untraced ones
        hull = {dim: (min([lo, *sizes[dim]]), max([hi, *sizes[dim]]))
                for dim, (lo, hi) in covered.items()}
        whole_inputs = restrict(inputs, kwarg_inputs, hull)
        whole = compile_traced(model, *whole_inputs, captured=program)
        checks = [{dim: (v, v)} for dim, values in sizes.items() for v in values] + points
        why = disagreement(model, whole, *whole_inputs, checks) if checks else None
        if why is None:
            whole.compile_report.untraced_sizes = describe(checks)
            return _raising([({}, whole)], inputs, kwarg_inputs, raises, [guards])
        log.info("compiling per size: the graph traced for %s is wrong elsewhere: %s",
                 covered, why)
    boxes = [dict(covered)] + [{dim: run} for dim, values in sizes.items()
                               for run in _runs(values, single=static is not None)]
    boxes += _merged(points)
    traced = None
    if program is not None and conditions:  # the trace, where its conditions hold
        traced = compile_traced(model, *restrict(inputs, kwarg_inputs, covered),
                                captured=program)
        guards = [(c.code, c.sizes) for c in conditions]
    try:
        return _by_size(compile_traced, model, inputs, kwarg_inputs, boxes, raises, traced,
                        guards)
    except Exception as branch_err:
        if static is None:
            raise
        raise static from branch_err  # the model really forces the size: say so


def _by_size(compile_traced, model, inputs, kwarg_inputs, boxes: list[Box],
             raises: list[tuple[Box, str]], traced=None, guards=()):
    """One module per box, the first ``traced`` when given (guarded by ``guards``)."""
    branches = [] if traced is None else [(boxes[0], traced)]
    for box in boxes[len(branches):]:
        box_inputs, box_kwargs = restrict(inputs, kwarg_inputs, box)
        branches.append((box, compile_covering(compile_traced, model, box_inputs, box_kwargs)))
    report = branches[0][1].compile_report
    report.size_branches = [{"sizes": sizes, "counts": module.compile_report.counts}
                            for sizes, (_, module) in zip(describe(boxes), branches)]
    if guards:
        report.size_branches[0]["where"] = [code for code, _ in guards]
    return _raising(branches, inputs, kwarg_inputs, raises, [list(guards)])


def _raising(branches, inputs, kwarg_inputs, raises: list[tuple[Box, str]], guards=None):
    """The one module of ``branches`` when eager raises nowhere and no branch is guarded,
    else a ``BySize`` that raises eager's error at the ``raises`` sizes. ``guards``: the
    conditions each branch runs under (missing: none)."""
    guards = list(guards or []) + [[] for _ in range(len(branches) - len(guards or []))]
    if len(branches) == 1 and not raises and not guards[0]:
        return branches[0][1]
    report = branches[0][1].compile_report  # (a nested BySize's sizes are kept)
    report.raising_sizes = report.raising_sizes + [
        {"sizes": sizes, "error": why} for sizes, (_, why) in zip(describe(raises), raises)]
    return BySize(branches, list(range(len(inputs))) + list(kwarg_inputs), raises, guards)


def describe(boxes: list) -> list[dict]:
    """Boxes (or (box, anything) pairs) as JSON: {"input i dim d": [lo, hi]}."""
    boxes = [b[0] if isinstance(b, tuple) else b for b in boxes]
    return [{f"input {i} dim {d}": [lo, hi] for (i, d), (lo, hi) in box.items()}
            for box in boxes]


def _too_many_sizes(static: DynamicShapeError, sizes: dict):
    """``static`` (the model fixes these dims) with the reason the compile stops there: eager
    runs at more than MAX_FORCED other sizes of a dim, each of which would be a compile of
    its own."""
    err = DynamicShapeError(
        f"{static} (Eager runs at more than {MAX_FORCED} other declared sizes of it; a size the "
        f"model fixes can only be compiled on its own, one compile per size, which this "
        f"compile does for a range of at most {MAX_FORCED + 1} sizes.)", static.dims)
    err.traced_at = static.traced_at
    return err


def _runs(values: list[int], single: bool = False) -> list[tuple[int, int]]:
    """Sorted sizes as runs of consecutive sizes (lo, hi); ``single``: one run per size (a
    dim the model fixes: no trace covers two of its sizes)."""
    runs: list[list[int]] = []
    for v in values:
        if runs and runs[-1][1] == v - 1 and not single:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return [(lo, hi) for lo, hi in runs]


def untraced(model, inputs, kwarg_inputs, covered: Box, enough: int | None = None):
    """(input, dim) -> the declared sizes outside ``covered`` at which eager runs, and the
    boxes (runs of sizes) where eager raises, each with eager's error. ``enough``: stop
    running eager at a dim once it ran at this many of its sizes."""
    specs = as_inputs(list(inputs)) + as_inputs(list(kwarg_inputs.values()))
    sizes, raises = {}, []
    for (i, d), (lo, hi) in covered.items():
        outside = [v for v in range(specs[i].min_shape[d], specs[i].max_shape[d] + 1)
                   if not lo <= v <= hi]
        sizes[(i, d)], failed = [], {}
        for k, v in enumerate(outside):
            why = eager_error(model, inputs, kwarg_inputs, {(i, d): (v, v)}) \
                if k < MAX_PROBED else None
            if why is None:
                sizes[(i, d)].append(v)
                if enough is not None and len(sizes[(i, d)]) >= enough:
                    break
            else:
                failed[v] = why
        raises += [({(i, d): run}, failed[run[0]]) for run in _runs(sorted(failed))]
    return sizes, raises


def off_conditions(model, inputs, kwarg_inputs, covered: Box,
                   conditions: Sequence[Condition]):
    """The declared sizes inside ``covered`` where a condition of the trace fails (Note
    [Conditions over several sizes]), run in eager: single-size boxes where eager runs,
    (box, eager's error) where it raises, and the conditions that fail at sizes not run
    (more than MAX_PROBED, or too many to list)."""
    runs, raises, unprobed, seen = [], [], [], set()
    for condition in conditions:
        dims = condition.dims
        inside = None if condition.failing is None else [
            p for p in condition.failing
            if all(covered.get(dim, (v, v))[0] <= v <= covered.get(dim, (v, v))[1]
                   for dim, v in zip(dims, p))]
        if inside is None or len(inside) > MAX_PROBED:
            unprobed.append(condition)
        for point in (inside or [])[:MAX_PROBED]:
            box = dict(zip(dims, ((v, v) for v in point)))
            if tuple(sorted(box.items())) in seen:
                continue
            seen.add(tuple(sorted(box.items())))
            why = eager_error(model, inputs, kwarg_inputs, box)
            if why is None:
                runs.append(box)
            else:
                raises.append((box, why))
    return runs, _merged_raises(raises), unprobed


def _merged(boxes: list[Box]) -> list[Box]:
    """Single-size boxes merged where they differ only in their last dim by consecutive
    sizes (fewer modules to compile)."""
    merged: list[Box] = []
    for box in sorted(boxes, key=lambda b: (list(b), list(b.values()))):
        last = list(box)[-1]
        if merged and list(merged[-1]) == list(box) and all(
                merged[-1][d] == box[d] for d in box if d != last) \
                and merged[-1][last][1] == box[last][0] - 1:
            merged[-1] = {**merged[-1], last: (merged[-1][last][0], box[last][1])}
        else:
            merged.append(dict(box))
    return merged


def _merged_raises(raises: list[tuple[Box, str]]) -> list[tuple[Box, str]]:
    """(box, error) pairs with their boxes merged as ``_merged`` does (the first error)."""
    why = {tuple(sorted(box.items())): error for box, error in raises}
    out = []
    for box in _merged([box for box, _ in raises]):
        first = {d: (lo, lo) for d, (lo, _) in box.items()}
        out.append((box, why[tuple(sorted(first.items()))]))
    return out


def eager_error(model, inputs, kwarg_inputs, box: Box) -> str | None:
    """None when eager runs ``model`` at ``box``'s sizes with the other dims at opt, min or
    max (random inputs); else the error it raised with them at opt."""
    errors, tried = [], []
    for at in ("opt_shape", "min_shape", "max_shape"):
        with torch.random.fork_rng(devices=[]), torch.no_grad(), eval_mode(model):
            torch.manual_seed(0)
            try:
                args, kwargs = _examples(inputs, kwarg_inputs, box, at)
                shapes = [tuple(v.shape) for v in [*args, *kwargs.values()]
                          if isinstance(v, torch.Tensor)]
                if shapes in tried:  # (static other dims: the same shapes again)
                    continue
                tried.append(shapes)
                model(*args, **kwargs)
                return None
            except Exception as err:  # noqa: BLE001  (what eager raises is the answer)
                errors.append(f"{type(err).__name__}: {err}")
    return errors[0]


def restrict(inputs: Sequence[Any], kwarg_inputs: dict[str, Any],
             box: Box) -> tuple[list[Any], dict[str, Any]]:
    """``inputs``/``kwarg_inputs`` with each Input's dims restricted to ``box`` (input ``i``
    counts positional inputs first, then keyword inputs in order)."""
    values = list(inputs) + list(kwarg_inputs.values())
    for (i, d), (lo, hi) in box.items():
        spec = values[i]
        if spec.profiles:  # each profile clamped to the box; those outside it dropped
            kept = []
            for p_lo, p_opt, p_hi in spec.profiles:
                a, c = max(p_lo[d], lo), min(p_hi[d], hi)
                if a <= c:
                    kept.append({"min": p_lo[:d] + (a,) + p_lo[d + 1:],
                                 "opt": p_opt[:d] + (min(max(p_opt[d], a), c),) + p_opt[d + 1:],
                                 "max": p_hi[:d] + (c,) + p_hi[d + 1:]})
            if len(kept) < len(spec.profiles):
                warnings.warn(f"input {i}: {len(spec.profiles) - len(kept)} optimization "
                              f"profile(s) lie outside sizes {lo}..{hi} of dim {d}, which this "
                              "trace covers: the module compiled for them has fewer profiles",
                              stacklevel=2)
            values[i] = Input(profiles=kept, dtype=spec.dtype, name=spec.name, low=spec.low,
                              high=spec.high)
            continue
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


def _examples(inputs, kwarg_inputs, box: Box, at: str = "opt_shape") -> tuple[list, dict]:
    """Example tensors: each Input at its opt shape (or ``at``: "min_shape", "max_shape")
    with ``box``'s dims set to their size."""
    values = list(inputs) + list(kwarg_inputs.values())
    for i, value in enumerate(values):
        if isinstance(value, Input):
            shape = list(getattr(value, at))
            for (j, d), (size, _) in box.items():
                if j == i:
                    shape[d] = size
            values[i] = value.example(shape)
    return _unflat(values, inputs, kwarg_inputs)
