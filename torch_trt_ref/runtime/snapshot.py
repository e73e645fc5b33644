"""The network snapshot (D2): a plain, picklable record of a built INetworkDefinition —
layer kinds, attributes, weights, tensor wiring and TensorRT's inferred shapes and dtypes —
read back through the TensorRT API."""

from __future__ import annotations

import enum
import operator
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
    # torch's dtype, or TensorRT's DataType name where torch has none (e.g. "INT4", "FP4")
    dtype: torch.dtype | str


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


_PLAIN = frozenset({bool, int, float, str, type(None)})


def _plain(value: Any) -> Any:
    """TensorRT attribute values -> plain Python (enums by name, Dims as tuples)."""
    if type(value) in _PLAIN or isinstance(value, (bool, int, float, str)):
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
    try:
        dtype = to_torch_dtype(tensor.dtype)
    except KeyError:  # a TensorRT type torch has no dtype for: kept by name
        dtype = tensor.dtype.name
    return TensorInfo(tensor.name, tuple(tensor.shape), dtype)


# Note [Layer inputs]: ``layer.num_inputs`` counts up to the highest input that is set,
# including inputs set after creation with ``layer.set_input(i, t)`` (the shape tensor of a
# shuffle, fill's alpha/beta, slice's start/size/stride/axes, a quantize's zero point), and
# ``get_input(j)`` of an unset j below it is None. Probed on every layer kind TensorRT's
# ONNX parser emits for ONNX's node test cases: no layer had a set input at or beyond
# num_inputs. ``_inputs`` still asks a few indices further, so a kind that counted
# differently could not lose an input silently.
_PROBE_BEYOND = 4


def _inputs(layer) -> list[str | None]:
    names = [_name(layer, j) for j in range(layer.num_inputs)]
    for j in range(layer.num_inputs, layer.num_inputs + _PROBE_BEYOND):
        name = _name(layer, j)
        if name is not None:
            names += [None] * (j - len(names)) + [name]
    return names


def _name(layer, index: int) -> str | None:
    try:
        tensor = layer.get_input(index)
    except (IndexError, ValueError, RuntimeError):
        return None
    return None if tensor is None else tensor.name


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
    if source is not None and source.dtype == torch.float4_e2m1fn_x2:
        return source.reshape(-1)  # packed in TensorRT (Note [Low-precision weights])
    nbytes = getattr(value, "nbytes", -1)
    if source is not None and nbytes == source.numel() * source.element_size():
        return source.reshape(-1)
    return None


def take_snapshot(net, weight_sources: dict[str, dict[str, torch.Tensor]]) -> NetworkSnapshot:
    inputs = [_tensor_info(net.get_input(i)) for i in range(net.num_inputs)]
    outputs = [net.get_output(i).name for i in range(net.num_outputs)]
    records = []
    kinds: dict = {}  # layer type -> (kind, its reference spec, (name, getter) per attribute)
    for i in range(net.num_layers):
        layer = net.get_layer(i)
        known = kinds.get(layer.type)
        if known is None:
            known = kinds[layer.type] = _kind(layer.type)
        kind, spec, getters = known
        record = LayerRecord(
            layer.name, kind, _inputs(layer),
            [_tensor_info(layer.get_output(j)) for j in range(layer.num_outputs)],
        )
        if spec is not None:
            layer.__class__ = spec.interface
            for name, getter in getters:
                try:
                    record.attrs[name] = _plain(getter(layer))
                except Exception:  # attribute not applicable to this configuration
                    record.attrs[name] = None
            sources = weight_sources.get(layer.name, {})
            for attr in spec.weights:
                record.attrs[attr] = _weights(getattr(layer, attr), sources.get(attr))
            dtype = record.outputs[0].dtype if record.outputs else None
            if kind == "CONSTANT" and record.attrs["weights"] is None and \
                    isinstance(dtype, torch.dtype):
                # an empty constant (shape (0, 2)): TensorRT gives back an empty array, which
                # _weights reads as "no weights"; it is zero values of the output's type
                record.attrs["weights"] = torch.empty(0, dtype=dtype)
        records.append(record)
    return NetworkSnapshot(inputs, outputs, _in_dependency_order(records))


def _kind(layer_type) -> tuple:
    """A layer type's kind name, its reference spec and a getter per attribute (a name, or
    (name, dotted path from the layer))."""
    kind = str(layer_type).rsplit(".", 1)[-1]
    spec = REFERENCE_LAYERS.get(kind)
    attrs = spec.attrs if spec is not None else ()
    pairs = [attr if isinstance(attr, tuple) else (attr, attr) for attr in attrs]
    return kind, spec, [(name, operator.attrgetter(path)) for name, path in pairs]


# Note [Layer order]: a network's layer order is creation order, which is not always an
# order the layers can run in: an input set later with ``set_input`` may come from a layer
# created after its consumer (TensorRT's ONNX parser adds TopK's k as a shape tensor after
# the TopK layer). The snapshot lists layers so that every producer comes first, keeping
# creation order wherever it already is one. A recurrence's input 1 is the loop's back
# edge (ILoop::addRecurrence: "the value at the end of an iteration") and is no dependency.
_BACK_EDGES = {("RECURRENCE", 1)}


def _in_dependency_order(records: list[LayerRecord]) -> list[LayerRecord]:
    producer = {info.name: i for i, r in enumerate(records) for info in r.outputs}

    def producers(i: int) -> list[int]:
        r = records[i]
        return [producer[name] for j, name in enumerate(r.inputs)
                if name in producer and (r.kind, j) not in _BACK_EDGES]

    order, entered = [], set()
    for root in range(len(records)):
        stack = [(root, False)]
        while stack:  # depth-first, producers before consumers, no recursion
            i, ready = stack.pop()
            if ready:
                order.append(records[i])
            elif i not in entered:  # a layer already entered is done or on a cycle
                entered.add(i)
                stack.append((i, True))
                stack += [(p, False) for p in reversed(producers(i)) if p not in entered]
    return order
