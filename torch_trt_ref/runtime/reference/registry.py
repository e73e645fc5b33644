"""Registry of reference layer kinds: for each TensorRT layer type, which attributes and
weights the snapshot reads back, and the torch function that states its semantics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..._trt import trt


@dataclass(frozen=True)
class LayerKind:
    name: str  # e.g. "ELEMENTWISE"
    interface: type  # e.g. trt.IElementWiseLayer, used to read attributes
    attrs: tuple[str | tuple[str, str], ...]  # a name, or (name, dotted path)
    weights: tuple[str, ...]
    # run(inputs: list[Tensor | None], **attrs_and_weights) -> tuple[Tensor]. Loop and
    # conditional boundary kinds also take what the executor knows of the iteration or
    # branch (index, count, history, taken); TRIP_LIMIT and CONDITION, which have no
    # outputs, return their decision as a bool (layers/control_flow.py).
    run: Callable


REFERENCE_LAYERS: dict[str, LayerKind] = {}


def reference_layer(layer_type: str, interface: str,
                    attrs: tuple[str | tuple[str, str], ...] = (),
                    weights: tuple[str, ...] = ()):
    """Register the reference function of one TensorRT layer type. ``interface`` is the
    name of the trt class whose properties ``attrs``/``weights`` are read from. A second
    function for one layer type is an error (one silently replaced the KV-cache update
    layer, dropping its packed form)."""

    def wrap(fn):
        cls = getattr(trt, interface, None)
        if cls is not None and hasattr(trt.LayerType, layer_type):
            if layer_type in REFERENCE_LAYERS:
                raise ValueError(f"reference layer {layer_type} is registered twice: "
                                 f"{REFERENCE_LAYERS[layer_type].run.__module__} and "
                                 f"{fn.__module__}")
            REFERENCE_LAYERS[layer_type] = LayerKind(layer_type, cls, attrs, weights, fn)
        return fn

    return wrap
