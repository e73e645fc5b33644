"""``EngineModule``: the nn.Module that stands in for a TensorRT segment in the stitched
graph; it runs its engine with the TensorRT executor or the reference executor."""

from __future__ import annotations

import torch

from ..build import Engine
from .reference.executor import run_snapshot
from .trt_executor import TensorRTExecutor, tensorrt_unavailable_reason


def choose_executor(requested: str, device: torch.device | None = None) -> str:
    """Resolve 'auto' to 'tensorrt' where the GPU supports the engine, else 'reference'.
    Asking for 'tensorrt' where it cannot run is a clear error."""
    reason = tensorrt_unavailable_reason()
    if requested == "tensorrt" and reason is not None:
        raise RuntimeError(f"executor='tensorrt' was requested but cannot run here: {reason}. "
                           "Use executor='reference' (runs the network snapshot with torch) "
                           "or executor='auto'.")
    if requested == "auto":
        on_cpu = device is not None and device.type == "cpu"
        return "reference" if reason is not None or on_cpu else "tensorrt"
    return requested


class EngineModule(torch.nn.Module):
    """One TensorRT engine. ``forward`` takes the segment's inputs positionally and returns
    a tensor (one output) or a tuple of tensors."""

    def __init__(self, engine: Engine, executor: str, name: str = "engine"):
        super().__init__()
        self.engine = engine
        self.executor = executor
        self.name = name
        self._trt = None

    def extra_repr(self) -> str:
        return (f"executor={self.executor}, layers={self.engine.layer_count}, "
                f"plan_bytes={self.engine.nbytes}")

    def _check_shapes(self, args) -> None:
        for spec, value in zip(self.engine.inputs, args):
            if not spec.contains(tuple(value.shape)):
                raise ValueError(
                    f"{self.name}: input {spec.name} has shape {tuple(value.shape)}, outside the "
                    f"compiled range min={spec.min_shape} max={spec.max_shape}; recompile with "
                    "an Input(min_shape, opt_shape, max_shape) that covers it")

    def forward(self, *args: torch.Tensor):
        self._check_shapes(args)
        named = {}
        for spec, value in zip(self.engine.inputs, args):
            named[spec.name] = value.to(spec.dtype) if value.dtype != spec.dtype else value
        if self.executor == "tensorrt":
            if self._trt is None:
                self._trt = TensorRTExecutor(self.engine.runnable_plan(),
                                             self.engine.requires_output_allocator)
            outputs = self._trt(named)
        else:
            # TensorRT writes dense, contiguous outputs; the reference executor matches that.
            outputs = [o.contiguous() for o in run_snapshot(self.engine.snapshot, named)]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
