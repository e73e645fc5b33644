"""Weight quantization folded once, as TensorRT's builder folds it: a QUANTIZE (or NVFP4's
DYNAMIC_QUANTIZE) layer whose inputs are CONSTANT layers (``constant -> Q -> DQ -> conv``,
a weight quantizer) yields a quantized constant, computed on the first run and reused until
the weights change (refit)."""

from __future__ import annotations

import weakref

import torch

from ..snapshot import LayerRecord, NetworkSnapshot

# id(snapshot) -> (weights key, {tensor name: folded value}); dropped with the snapshot
_FOLDED: dict[int, tuple[tuple, dict[str, torch.Tensor]]] = {}


def foldable(snapshot: NetworkSnapshot) -> list[LayerRecord]:
    """The QUANTIZE / DYNAMIC_QUANTIZE layers whose inputs all come from CONSTANT layers."""
    constant = {o.name for layer in snapshot.layers if layer.kind == "CONSTANT"
                for o in layer.outputs}
    return [layer for layer in snapshot.layers if layer.kind in ("QUANTIZE", "DYNAMIC_QUANTIZE")
            and all(name is None or name in constant for name in layer.inputs)]


def _weights_key(snapshot: NetworkSnapshot) -> tuple:
    """Identity and version of every constant's weights: refit replaces or edits them."""
    return tuple((id(w), w._version) for layer in snapshot.layers if layer.kind == "CONSTANT"
                 for w in (layer.attrs.get("weights"),) if isinstance(w, torch.Tensor))


def folded(snapshot: NetworkSnapshot, run, device: torch.device) -> dict[str, torch.Tensor]:
    """Outputs of the foldable QUANTIZE layers, by tensor name; ``run(layers, values)``
    runs layers (the executor's), computing them when the weights changed."""
    layers = foldable(snapshot)
    if not layers:
        return {}
    key = (_weights_key(snapshot), str(device))
    cached = _FOLDED.get(id(snapshot))
    if cached is not None and cached[0] == key:
        return cached[1]
    needed = {name for layer in layers for name in layer.inputs if name is not None}
    producers = [layer for layer in snapshot.layers if layer.kind == "CONSTANT"
                 and any(o.name in needed for o in layer.outputs)]
    values: dict[str, torch.Tensor] = {}
    run(producers + layers, values)
    result = {o.name: values[o.name] for layer in layers for o in layer.outputs}
    if id(snapshot) not in _FOLDED:
        weakref.finalize(snapshot, _FOLDED.pop, id(snapshot), None)
    _FOLDED[id(snapshot)] = (key, result)
    return result


def forget(snapshot: NetworkSnapshot) -> None:
    """Drop the folded values of ``snapshot`` (refit changed its weights)."""
    _FOLDED.pop(id(snapshot), None)
