"""Runs a ``NetworkSnapshot`` with torch ops on CPU or CUDA, checking every layer's
outputs against the shapes and dtypes TensorRT inferred for them."""

from __future__ import annotations

import torch

from ..snapshot import LayerRecord, NetworkSnapshot, TensorInfo
from .registry import REFERENCE_LAYERS


class ReferenceMismatchError(RuntimeError):
    """A reference layer produced a shape or dtype TensorRT did not infer: our reading of
    TensorRT's semantics (or a converter) is wrong."""


def _check(layer: LayerRecord, info: TensorInfo, value: torch.Tensor) -> None:
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
    view of the intermediates)."""
    values = {} if values is None else values
    for info in snapshot.inputs:
        value = inputs[info.name]
        _check(LayerRecord("input", "INPUT", [], [info]), info, value)
        values[info.name] = value
    device = next(iter(values.values())).device if values else torch.device("cpu")
    for layer in snapshot.layers:
        kind = REFERENCE_LAYERS.get(layer.kind)
        if kind is None:
            raise NotImplementedError(
                f"the reference executor has no function for TensorRT layer kind {layer.kind} "
                f"(layer {layer.name})")
        args = [values[name] if name is not None else None for name in layer.inputs]
        attrs = {k: (v.to(device) if isinstance(v, torch.Tensor) else v)
                 for k, v in layer.attrs.items()}
        outputs = kind.run(args, **attrs)
        for info, value in zip(layer.outputs, outputs):
            _check(layer, info, value)
            values[info.name] = value
    return [values[name] for name in snapshot.outputs]
