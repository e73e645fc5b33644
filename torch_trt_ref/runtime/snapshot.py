"""The network snapshot (D2): a plain, picklable record of a built INetworkDefinition —
layer kinds, attributes, weights, tensor wiring and TensorRT's inferred shapes and dtypes —
read back through the TensorRT API."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .._trt import to_torch_dtype
from .reference import layers  # noqa: F401  (registers the reference layer kinds)
from .reference.registry import REFERENCE_LAYERS


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # TensorRT's inferred dims, -1 where dynamic
    dtype: torch.dtype


@dataclass
class LayerRecord:
    name: str
    kind: str
    inputs: list[str | None]
    outputs: list[TensorInfo]
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class NetworkSnapshot:
    inputs: list[TensorInfo]
    outputs: list[str]
    layers: list[LayerRecord]
    # FX node name -> tensor names of its value, and -> its converter (torch_trt_ref.debug).
    node_outputs: dict[str, tuple[str | None, ...]] = field(default_factory=dict)
    node_converters: dict[str, str] = field(default_factory=dict)

    def kinds(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for layer in self.layers:
            counts[layer.kind] = counts.get(layer.kind, 0) + 1
        return counts

    def unsupported_kinds(self) -> list[str]:
        return sorted({layer.kind for layer in self.layers if layer.kind not in REFERENCE_LAYERS})

    def weight_bytes(self) -> int:
        total = 0
        for layer in self.layers:
            for value in layer.attrs.values():
                if isinstance(value, torch.Tensor):
                    total += value.numel() * value.element_size()
        return total


def _plain(value: Any) -> Any:
    """TensorRT attribute values -> plain Python (enums by name, Dims as tuples)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, enum.Enum) or type(value).__module__.startswith("tensorrt"):
        name = getattr(value, "name", None)
        if isinstance(name, str):
            return name
        try:
            return tuple(value)
        except TypeError:
            return str(value)
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v) for v in value)
    return value


def _tensor_info(tensor) -> TensorInfo:
    return TensorInfo(tensor.name, tuple(tensor.shape), to_torch_dtype(tensor.dtype))


def _weights(value: Any, source: torch.Tensor | None) -> torch.Tensor | None:
    """Weights read back from TensorRT as a flat torch tensor. When TensorRT's array points
    at the storage the converter passed in, that tensor itself is used (no copy: the
    snapshot shares storage with the model); bf16 has no numpy type and always does so."""
    if isinstance(value, np.ndarray):
        if value.size == 0:
            return None
        if source is not None and value.ctypes.data == source.data_ptr():
            return source.reshape(-1)
        return torch.from_numpy(value.copy()).reshape(-1)
    nbytes = getattr(value, "nbytes", -1)
    if source is not None and nbytes == source.numel() * source.element_size():
        return source.reshape(-1)
    return None


def take_snapshot(net, weight_sources: dict[str, dict[str, torch.Tensor]]) -> NetworkSnapshot:
    inputs = [_tensor_info(net.get_input(i)) for i in range(net.num_inputs)]
    outputs = [net.get_output(i).name for i in range(net.num_outputs)]
    records = []
    for i in range(net.num_layers):
        layer = net.get_layer(i)
        kind = str(layer.type).rsplit(".", 1)[-1]
        record = LayerRecord(
            layer.name, kind,
            [layer.get_input(j).name if layer.get_input(j) is not None else None
             for j in range(layer.num_inputs)],
            [_tensor_info(layer.get_output(j)) for j in range(layer.num_outputs)],
        )
        spec = REFERENCE_LAYERS.get(kind)
        if spec is not None:
            layer.__class__ = spec.interface
            for attr in spec.attrs:
                try:
                    record.attrs[attr] = _plain(getattr(layer, attr))
                except Exception:  # attribute not applicable to this configuration
                    record.attrs[attr] = None
            sources = weight_sources.get(layer.name, {})
            for attr in spec.weights:
                record.attrs[attr] = _weights(getattr(layer, attr), sources.get(attr))
        records.append(record)
    return NetworkSnapshot(inputs, outputs, records)
