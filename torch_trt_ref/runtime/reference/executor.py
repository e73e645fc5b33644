"""Runs a ``NetworkSnapshot`` with torch ops on CPU or CUDA, checking every layer's
outputs against the shapes and dtypes TensorRT inferred for them. Loops iterate and
conditionals branch for real (the plan in ``plan.py`` says which layers they hold)."""

from __future__ import annotations

import itertools

import torch

from ..snapshot import LayerRecord, NetworkSnapshot, TensorInfo
from .folding import folded
from .layers.attention_ops import unrunnable_reason
from .plan import Region, Step, plan
from .registry import REFERENCE_LAYERS


class ReferenceMismatchError(RuntimeError):
    """A reference layer produced a shape or dtype TensorRT did not infer: our reading of
    TensorRT's semantics (or a converter) is wrong."""


def _check(layer: LayerRecord, info: TensorInfo, value: torch.Tensor) -> None:
    """``value`` has the dtype (Note [Low-precision tensors]) and shape TensorRT inferred."""
    if not isinstance(info.dtype, torch.dtype):  # a TensorRT type without a representation
        raise NotImplementedError(
            f"layer {layer.name} ({layer.kind}) output {info.name}: the reference executor "
            f"has no representation for TensorRT type {info.dtype}")
    if value.dtype != info.dtype:
        raise ReferenceMismatchError(
            f"layer {layer.name} ({layer.kind}) output {info.name}: dtype {value.dtype}, "
            f"TensorRT inferred {info.dtype}")
    if len(value.shape) != len(info.shape) or any(
            e >= 0 and e != g for e, g in zip(info.shape, value.shape)):
        raise ReferenceMismatchError(
            f"layer {layer.name} ({layer.kind}) output {info.name}: shape {tuple(value.shape)}, "
            f"TensorRT inferred {info.shape}")


def run_snapshot(snapshot: NetworkSnapshot, inputs: dict[str, torch.Tensor],
                 values: dict[str, torch.Tensor] | None = None) -> list[torch.Tensor]:
    """Execute ``snapshot`` on named input tensors; returns outputs in network order.
    ``values``, when given, receives every tensor of the network by name (the debugger's
    view of the intermediates; inside a loop, the last iteration's)."""
    values = {} if values is None else values
    for info in snapshot.inputs:
        value = inputs[info.name]
        _check(LayerRecord("input", "INPUT", [], [info]), info, value)
        values[info.name] = value
    device = next(iter(values.values())).device if values else torch.device("cpu")
    done = folded(snapshot, lambda layers, into: _run_steps(layers, into, device), device)
    values.update(done)
    layers = snapshot.layers
    if done:  # computed once, as TensorRT folds weight quantization (folding.py)
        layers = [layer for layer in layers if not any(o.name in done for o in layer.outputs)]
    _run_steps(plan(layers), values, device)
    return [values[name] for name in snapshot.outputs]


def _run_steps(steps: list[Step], values: dict, device: torch.device) -> None:
    for step in steps:
        if isinstance(step, Region):
            _REGIONS[step.kind](step, values, device)
        else:
            _run_layer(step, values, device)


def layer_kind(layer: LayerRecord):
    """The registered ``LayerKind`` of ``layer``; NotImplementedError naming it if none."""
    kind = REFERENCE_LAYERS.get(layer.kind)
    if kind is None:
        why = unrunnable_reason(layer.kind)
        raise NotImplementedError(
            f"the reference executor has no function for TensorRT layer kind {layer.kind} "
            f"(layer {layer.name})" + (f": {why}" if why else ""))
    return kind


def _call(layer: LayerRecord, values: dict, device: torch.device, **context):
    """The reference function's result for ``layer``. Inputs not computed are None: a
    recurrence's next value before the first iteration, the untaken branch's value."""
    kind = layer_kind(layer)
    args = [values.get(name) if name is not None else None for name in layer.inputs]
    attrs = {k: (v.to(device) if isinstance(v, torch.Tensor) else v)
             for k, v in layer.attrs.items()}
    return kind.run(args, **attrs, **context)


def _store(layer: LayerRecord, outputs, values: dict) -> None:
    for info, value in zip(layer.outputs, outputs):
        _check(layer, info, value)
        values[info.name] = value


def _run_layer(layer: LayerRecord, values: dict, device: torch.device, **context) -> None:
    _store(layer, _call(layer, values, device, **context), values)


def _run_loop(loop: Region, values: dict, device: torch.device) -> None:
    """One ILoop, iterating for real ("Working with Loops"): each iteration sets the
    recurrences, computes what the WHILE limits read, stops when a trip limit says so,
    slices the iterators, runs the body and records the loop outputs' inputs. Stopping
    comes after the recurrences were set, so LAST_VALUE outputs read the state after the
    last iteration."""
    limits = loop.boundary.get("TRIP_LIMIT", [])
    if not limits:  # "It is an error to not add at least one trip limiter" (addTripLimit)
        raise ValueError(f"loop {loop.name} has no trip limit")
    recurrences = loop.boundary.get("RECURRENCE", [])
    outputs = loop.boundary.get("LOOP_OUTPUT", [])
    counts = [int(values[t.inputs[0]]) for t in limits if t.attrs["kind"] == "COUNT"]
    history: list[list[torch.Tensor]] = [[] for _ in outputs]
    for index in itertools.count():
        updates = [_call(r, values, device, index=index) for r in recurrences]
        for layer, update in zip(recurrences, updates):  # all read before any is set
            _store(layer, update, values)
        _run_steps(loop.steps["head"], values, device)
        if not all(_call(t, values, device, index=index) for t in limits):
            break
        for layer in loop.boundary.get("ITERATOR", []):
            _run_layer(layer, values, device, index=index, count=min(counts, default=None))
        _run_steps(loop.steps["body"], values, device)
        for layer, seen in zip(outputs, history):
            seen.append(values[layer.inputs[0]])
    for layer, seen in zip(outputs, history):
        _run_layer(layer, values, device, history=seen, output=layer.outputs[0])


def _run_conditional(conditional: Region, values: dict, device: torch.device) -> None:
    """One IIfConditional ("Working with Conditionals"): only the branch the condition
    picks runs."""
    (condition,) = conditional.boundary["CONDITION"]
    taken = _call(condition, values, device)
    for layer in conditional.boundary.get("CONDITIONAL_INPUT", []):
        _run_layer(layer, values, device)
    _run_steps(conditional.steps["then" if taken else "else"], values, device)
    for layer in conditional.boundary.get("CONDITIONAL_OUTPUT", []):
        _run_layer(layer, values, device, taken=taken)


_REGIONS = {"loop": _run_loop, "conditional": _run_conditional}
