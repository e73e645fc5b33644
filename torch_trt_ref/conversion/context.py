"""``ConversionContext``: the state one converter call sees — the network under
construction, the settings, node -> value maps, and the refit map of weight sources."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.fx import Node

from .._trt import to_trt_dtype, trt
from ..settings import CompilationSettings
from ..weights import untraced

# Note [Low-precision weights]: a pre-quantized weight (NVFP4 data and its FP8 block scales,
# docs/quantization.md) is a constant of TensorRT type FP4 or FP8. The converter hands over
# the tensor as the reference executor holds it (one value per byte, Note [Low-precision
# tensors]); TensorRT's Weights get FP8 bytes as they are and FP4 packed two per byte, the
# first element in the low nibble. The snapshot keeps the unpacked tensor.
LOW_PRECISION_WEIGHTS = {torch.float8_e4m3fn: trt.fp8, torch.float4_e2m1fn_x2: trt.fp4}


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """FP4 codes held one per byte, packed two per byte as TensorRT stores FP4 weights."""
    flat = codes.reshape(-1).view(torch.uint8) & 0xF
    if flat.numel() % 2:
        flat = torch.cat([flat, flat.new_zeros(1)])
    return (flat[0::2] | (flat[1::2] << 4)).contiguous()


# Note [Metadata reads skip the weight tracer]: while a compile converts, the weight tracer
# (a TorchFunctionMode, Note [Weight program] in weights.py) sees every torch call, and a
# read of a weight's dtype, shape, pointer or storage is one too: ~3,700 of the 7,600 calls
# BERT-base's conversion made, each through Python. Reads of metadata are not functions of
# the values, which is all the tracer records, so handing a weight to TensorRT reads them
# under ``weights.untraced`` (torch functions off); the calls that make the tensor the
# program must recompute (detach, the cast, cpu, contiguous) stay traced. (FP4 packing
# feeds TensorRT only.) So do the interpreter's reads of FakeTensor metadata: the
# dynamic-shape check, the match to the node's dtype, type promotion
# (``helpers.result_type``), a validator's dtypes; BERT-base's conversion now makes 2,047
# traced calls (4,813 before). Validators that may read a weight's values stay traced: the
# program keeps such reads as guards.


@dataclass
class ConversionContext:
    net: Any  # trt.INetworkDefinition
    settings: CompilationSettings
    tensors: dict[Node, Any] = field(default_factory=dict)  # node -> ITensor (or tuple)
    constants: dict[Node, Any] = field(default_factory=dict)  # node -> torch.Tensor / scalar
    refit_map: dict[str, list[str]] = field(default_factory=dict)  # parameter -> layer names
    weight_sources: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    param_names: dict[int, str] = field(default_factory=dict)  # storage address -> parameter
    node: Node | None = None
    # layers a converter's preamble added before the first layer, by the node they are for
    # (Note [Converter preambles], registry.py)
    prepared: dict[Node, Any] = field(default_factory=dict)
    _keepalive: list[torch.Tensor] = field(default_factory=list)
    _weight_constants: dict[tuple, Any] = field(default_factory=dict)
    _layer_count: int = 0

    def name_layer(self, layer, kind: str | None = None):
        """Give ``layer`` a unique name derived from the node being converted."""
        self._layer_count += 1
        owner = self.node.name if self.node is not None else "net"
        kind = kind or str(layer.type).rsplit(".", 1)[-1].lower()
        layer.name = f"{owner}/{kind}_{self._layer_count}"
        return layer

    # -- values ------------------------------------------------------------------------
    @property
    def out_meta(self):
        """The FakeTensor (or tuple of them) torch inferred for the current node's output."""
        return self.node.meta.get("val") if self.node is not None else None

    @property
    def out_dtype(self) -> torch.dtype:
        val = self.out_meta
        if isinstance(val, (tuple, list)):
            val = val[0]
        return val.dtype

    # -- weights -----------------------------------------------------------------------
    def weights(self, tensor: torch.Tensor, dtype: torch.dtype | None = None):
        """A ``trt.Weights`` view of ``tensor`` (cast to ``dtype`` if given). The storage is
        kept alive for the network's lifetime; the source is remembered for refit."""
        source = tensor
        tensor = tensor.detach()
        with untraced():
            cast = dtype is not None and tensor.dtype != dtype
        if cast:
            tensor = tensor.to(dtype)
        tensor = tensor.cpu().contiguous()
        self._keepalive.append(tensor)
        with untraced():
            kind = LOW_PRECISION_WEIGHTS.get(tensor.dtype)  # Note [Low-precision weights]
            if kind is None:
                kind, buffer = to_trt_dtype(tensor.dtype), tensor
            else:  # FP4 packed for TensorRT only: the program keeps the unpacked tensor
                buffer = pack_fp4(tensor) if kind == trt.fp4 else tensor
                self._keepalive.append(buffer)
            weights = trt.Weights(kind, buffer.data_ptr(), tensor.numel())
            return weights, tensor, self.parameter_of(source)

    def parameter_of(self, tensor: torch.Tensor) -> str | None:
        """The model parameter ``tensor`` is (a view of), if any."""
        with untraced():
            return self.param_names.get(tensor.untyped_storage().data_ptr())

    def record_weights(self, layer, role: str, tensor: torch.Tensor, param: str | None) -> None:
        """Remember which tensor (and which model parameter, if any) fed a layer's weights."""
        self.weight_sources.setdefault(layer.name, {})[role] = tensor
        if param is not None:
            self.refit_map.setdefault(param, []).append(layer.name)

    def constant(self, value: Any, dtype: torch.dtype | None = None):
        """An ITensor holding ``value`` (tensor, numpy array or Python scalar/list)."""
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
        if not isinstance(value, torch.Tensor):
            value = torch.tensor(value, dtype=dtype)
        # A model weight used by several layers (GPT-2's tied embedding) becomes one
        # constant layer, so the engine holds it once.
        key = None
        if self.parameter_of(value) is not None:
            with untraced():
                key = (value.data_ptr(), tuple(value.shape), value.stride(), value.dtype, dtype)
            if key in self._weight_constants:
                return self._weight_constants[key]
        weights, stored, param = self.weights(value, dtype)
        with untraced():
            shape = tuple(stored.shape)
        layer = self.name_layer(self.net.add_constant(shape, weights), "constant")
        self.record_weights(layer, "weights", stored, param)
        if key is not None:
            self._weight_constants[key] = layer.get_output(0)
        return layer.get_output(0)
