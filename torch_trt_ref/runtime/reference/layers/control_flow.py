"""Reference semantics of TensorRT's control-flow boundary layers: loops (TRIP_LIMIT,
RECURRENCE, ITERATOR, LOOP_OUTPUT) and conditionals (CONDITION, CONDITIONAL_INPUT,
CONDITIONAL_OUTPUT). Each function states one boundary layer's part of an iteration or a
branch; the executor supplies the iteration ``index``, the trip ``count``, the per-iteration
``history`` and the branch ``taken``. Which layers form a loop body or a branch is worked out
in ``reference/plan.py``.

Semantics: TensorRT "Working with Loops" and "Working with Conditionals"
(docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/work-with-loops.html and
.../work-with-conditionals.html), and the ILoop / ILoopOutputLayer API pages."""

from __future__ import annotations

import torch

from ..registry import reference_layer


@reference_layer("TRIP_LIMIT", "ITripLimitLayer", attrs=("loop", "kind"))
def trip_limit(inputs, loop, kind, *, index):
    """Whether iteration ``index`` (from 0) runs. COUNT: the input is a 0-D integer trip
    count, set before the loop starts. WHILE: the input is a 0-D bool computed inside the
    loop from the recurrences' current values, read before each iteration. A loop with
    both stops at whichever ends first. The layer has no outputs: it returns the decision."""
    (limit,) = inputs
    return index < int(limit) if kind == "COUNT" else bool(limit)


@reference_layer("RECURRENCE", "IRecurrenceLayer", attrs=("loop",))
def recurrence(inputs, loop, *, index):
    """Input 0 (set before the loop) in iteration 0; afterwards the value input 1 had at
    the end of the previous iteration (the only back edge a TensorRT loop has)."""
    initial, previous = inputs
    return (initial if index == 0 else previous,)


@reference_layer("ITERATOR", "IIteratorLayer", attrs=("loop", "axis", "reverse"))
def iterator(inputs, loop, axis, reverse, *, index, count):
    """Slice ``index`` of the input along ``axis`` (the axis is removed), like
    ``gather(x, index, axis)``; with ``reverse`` slice ``count - 1 - index``, where
    ``count`` is the trip count of the loop's COUNT limit (ILoop::addIterator)."""
    (x,) = inputs
    if reverse and count is None:
        raise ValueError(f"reverse iterator of loop {loop} needs a COUNT trip limit")
    return (x.select(axis, count - 1 - index if reverse else index),)


@reference_layer("LOOP_OUTPUT", "ILoopOutputLayer", attrs=("loop", "kind", "axis"))
def loop_output(inputs, loop, kind, axis, *, history, output):
    """LAST_VALUE: the input is a RECURRENCE output; the loop's output is its value after
    the last iteration (the executor advances the recurrences once more before exiting, so
    that value is input 0 now). The API pages only say "the last value"; this reading is the
    one TensorRT's ONNX parser relies on for the final state of Loop and Scan, and ONNX's
    test_loop11 and test_scan* expected outputs confirm it. CONCATENATE: the input's value
    of every iteration, stacked along a new dimension at ``axis`` whose length is input 1
    (a 0-D shape tensor set before the loop). REVERSE: the same in reverse iteration order.
    ``output`` is the TensorInfo TensorRT inferred for the layer's output."""
    if kind == "LAST_VALUE":
        return (inputs[0],)
    length = int(inputs[1])
    if length == 0 and not history:
        return (_empty_concatenation(loop, axis, output, inputs[1].device),)
    # Note [Concatenation length]: TensorRT does not say what fills a CONCATENATE/REVERSE
    # output when the loop ran fewer (or more) iterations than input 1 asks for; the
    # reference refuses rather than guess.
    if len(history) != length:
        raise ValueError(f"loop {loop} output: {len(history)} iterations ran, input 1 "
                         f"asks for {length}")
    values = history[::-1] if kind == "REVERSE" else history
    return (torch.stack(values, dim=axis),)


def _empty_concatenation(loop, axis, output, device) -> torch.Tensor:
    """A CONCATENATE/REVERSE output of length 0 after no iteration: ILoopOutputLayer's API
    gives the output the input's dimensions [b, c, d] with the length a inserted at
    ``axis`` (setAxis(0): [a, b, c, d]), so with a = 0 it is an empty tensor of those dims,
    whatever the (never computed) slices hold. The input's dims are the output's without
    ``axis``, as TensorRT inferred them; one TensorRT leaves to run time (-1) cannot be
    known without an iteration, and is refused."""
    dims = [d for i, d in enumerate(output.shape) if i != axis]
    if any(d < 0 for d in dims):
        raise ValueError(f"loop {loop} output: no iteration ran and the slices' shape "
                         f"{tuple(dims)} is only known at run time (-1)")
    return torch.empty(dims[:axis] + [0] + dims[axis:], dtype=output.dtype, device=device)


@reference_layer("CONDITION", "IConditionLayer", attrs=("conditional",))
def condition(inputs, conditional):
    """The 0-D bool that picks the branch: true runs the then-branch, false the else-branch.
    The layer has no outputs: it returns the decision."""
    (predicate,) = inputs
    return bool(predicate)


@reference_layer("CONDITIONAL_INPUT", "IIfConditionalInputLayer", attrs=("conditional",))
def conditional_input(inputs, conditional):
    """Passes an outside tensor into one or both branches unchanged."""
    return (inputs[0],)


@reference_layer("CONDITIONAL_OUTPUT", "IIfConditionalOutputLayer", attrs=("conditional",))
def conditional_output(inputs, conditional, *, taken):
    """Input 0 (the then-branch's value) when the condition was true, else input 1; only
    the taken branch was computed, so the other input is None."""
    return (inputs[0] if taken else inputs[1],)
