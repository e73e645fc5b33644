"""Replays with the shapes resolved before capture (``with shapes_resolved():``): for one
input signature, the layers whose values follow from the input shapes alone are computed
once and left out of the replay, so a replay makes no tensor from host values and reads
none back, and a CUDA graph can capture a dynamic-shape network's step (``llm.DecodeGraph``
over the two-profile engine).

Note [Shapes resolved before capture]: a dynamic-shape network computes its shapes at run
time, as TensorRT does on the host at enqueue: SHAPE layers give the input's dims, and
CONCATENATION, GATHER, SLICE, ELEMENTWISE and FILL layers over those (and over integer
constants) give the reshape dims, slice bounds and position ranges that other layers read.
In the reference executor a SHAPE layer makes a device tensor from host values and a
SHUFFLE or SLICE reads its shape input back (``.tolist()``): a CUDA graph capture forbids
both ("Cannot copy between CPU and CUDA tensors during CUDA graph capture"). For one input
signature (shapes and dtypes) those values are fixed, so ``Resolved``:
  - takes every *shape value* from a checked run of the plain replay: the outputs of SHAPE
    layers, and of every layer all of whose inputs are shape values or integer constants
    (random FILLs excepted; float constants excepted, so a refit cannot leave a stale
    value);
  - keeps them, on the device, and on the host where a layer reads them there
    (``HOST_INPUTS``: TensorRT's shape-tensor inputs of the kinds that have them), as it
    keeps host copies of the integer constants such inputs read (a SLICE's start and
    stride: without them the first real capture, on an H200, failed with "Cannot copy
    between CPU and CUDA tensors during CUDA graph capture", a read the CPU recorder of
    tests/test_llm.py could not see);
  - replays the other calls only, each reading its shape inputs from those kept values.
The result equals the plain replay's bit for bit (the same calls on the same values;
tests/test_llm.py holds it to it). While a resolved replay runs, ``capturing()`` is true: the
layer functions skip their host-reading checks, as under a real capture; the checked run
made them. A new signature is resolved at its first call (a plain, checked run)."""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

import torch

_REQUESTED = contextvars.ContextVar("torch_trt_ref_shapes_resolved", default=False)
_RUNNING = contextvars.ContextVar("torch_trt_ref_resolved_running", default=False)

# The inputs each layer kind reads on the host (TensorRT's shape-tensor inputs): SHUFFLE's
# reshape dims; SLICE's start, size, stride and axes (input 4, the fill value, is data);
# FILL's dims, alpha and beta; RESIZE's output dims or scales; SQUEEZE/UNSQUEEZE's axes;
# TOPK's k, CUMULATIVE's axis, ONE_HOT's depth, NMS's output limit.
HOST_INPUTS: dict[str, frozenset[int]] = {
    "SHUFFLE": frozenset({1}), "SLICE": frozenset({1, 2, 3, 5}), "FILL": frozenset({0, 1, 2}),
    "RESIZE": frozenset({1}), "SQUEEZE": frozenset({1}), "UNSQUEEZE": frozenset({1}),
    "TOPK": frozenset({1}), "CUMULATIVE": frozenset({1}), "ONE_HOT": frozenset({2}),
    "NMS": frozenset({2}),
}
RANDOM_FILLS = {"RANDOM_UNIFORM", "RANDOM_NORMAL"}


@contextlib.contextmanager
def shapes_resolved() -> Iterator[None]:
    """Reference replays of prepared (flat) networks run resolved in this block (Note
    [Shapes resolved before capture]); outside it, the plain replay runs."""
    token = _REQUESTED.set(True)
    try:
        yield
    finally:
        _REQUESTED.reset(token)


def requested() -> bool:
    return _REQUESTED.get()


def running() -> bool:
    """Whether a resolved replay is running (``capturing()`` is then true)."""
    return _RUNNING.get()


def shape_slots(prepared) -> tuple[frozenset[int], frozenset[int]]:
    """The slots of ``prepared``'s calls that hold shape values (Note [Shapes resolved
    before capture]), whatever the input signature, and those of its integer constants."""
    integer_constants: set[int] = {0}  # slot 0: an unset optional input (None)
    shapes: set[int] = set()
    for (_fn, ins, attrs, outs), layer in zip(prepared.fast, prepared.fast_layers):
        if layer.kind == "SHAPE":
            shapes.update(outs)
        elif not ins:
            if all(not (isinstance(o.dtype, torch.dtype) and o.dtype.is_floating_point)
                   for o in layer.outputs):
                integer_constants.update(outs)
        elif (attrs.get("operation") not in RANDOM_FILLS and any(i in shapes for i in ins)
              and all(i in shapes or i in integer_constants for i in ins)):
            shapes.update(outs)
    return frozenset(shapes), frozenset(integer_constants - {0})


class Resolved:
    """``prepared``'s replay for one input signature with its shape values kept: built from
    ``values``, every slot's value of a run at that signature. ``constants``: the integer
    constants' slots; those a layer reads on the host (a SLICE's start or stride) are read
    from host copies too. Their layers still run, and the copies cannot go stale: a refit
    drops the engine's whole reference runner, these copies with it (refit.py)."""

    def __init__(self, prepared, shapes: frozenset[int], values: list,
                 constants: frozenset[int]):
        template = list(values[:prepared.size])
        for slot in range(len(template)):
            if slot not in shapes:
                template[slot] = None  # (slot 0 is None already)
        host: dict[int, int] = {}  # shape slot -> the slot of its host copy
        self.calls = []
        self.left_out = []  # the layers computed once, not replayed
        for (fn, ins, attrs, outs), layer in zip(prepared.fast, prepared.fast_layers):
            if all(o in shapes for o in outs):
                self.left_out.append(layer)
                continue
            reads = HOST_INPUTS.get(layer.kind, frozenset())
            mapped = []
            for j, i in enumerate(ins):
                if j in reads and (i in shapes or i in constants):
                    if i not in host:
                        host[i] = len(template)
                        template.append(values[i].cpu())
                    i = host[i]
                mapped.append(i)
            self.calls.append((fn, tuple(mapped), attrs, outs))
        self.template, self.inputs, self.outputs = template, prepared.inputs, prepared.outputs
        self.kept_outputs = {i for i in self.outputs if i in shapes}  # (a fresh tensor each)

    def run(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        values = list(self.template)
        for index, value in zip(self.inputs, inputs):
            values[index] = value
        token = _RUNNING.set(True)
        try:
            for fn, ins, attrs, outs in self.calls:
                for index, value in zip(outs, fn([values[i] for i in ins], **attrs)):
                    values[index] = value
        finally:
            _RUNNING.reset(token)
        return [values[index].clone() if index in self.kept_outputs else
                values[index].contiguous() for index in self.outputs]
