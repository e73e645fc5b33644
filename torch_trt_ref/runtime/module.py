"""``EngineModule``: the nn.Module that stands in for a TensorRT segment in the stitched
graph; it runs its engine, through the ``execute_engine`` op when traced and directly in
eager calls, with the TensorRT executor or the reference executor."""

from __future__ import annotations

import torch

from .custom_op import EngineHandle
from .engine import Engine
from .opaque import HAS_OPAQUE_HANDLES
from .output_rules import output_rules
from .trt_executor import tensorrt_unavailable_reason


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
    a tensor (one output) or a tuple of tensors. It calls the ``torch_trt_ref::execute_engine``
    op with the module's ``EngineHandle`` (``runtime/custom_op.py``), so eager runs,
    ``torch.export`` programs and loaded programs all run the engine the same way.
    ``segment`` is the GraphModule the engine was built from; its symbolic shapes give the
    op's fake implementation."""

    def __init__(self, engine: Engine, executor: str, name: str = "engine",
                 segment: torch.fx.GraphModule | None = None):
        super().__init__()
        self.handle = EngineHandle(engine, executor, name, output_rules(segment, engine))

    @property
    def engine(self) -> Engine:
        return self.handle.engine

    @engine.setter
    def engine(self, engine: Engine) -> None:  # e.g. a refit engine: deserialized anew
        self.handle.engine, self.handle._trt, self.handle._reference = engine, None, None

    @property
    def executor(self) -> str:
        return self.handle.executor

    @executor.setter
    def executor(self, executor: str) -> None:
        self.handle.executor = executor

    @property
    def name(self) -> str:
        return self.handle.name

    def extra_repr(self) -> str:
        return (f"executor={self.executor}, layers={self.engine.layer_count}, "
                f"plan_bytes={self.engine.nbytes}")

    def _apply(self, fn, recurse: bool = True):
        """``.to(device)`` / ``.cuda()`` / ``.cpu()`` move the engine's weights (the network
        snapshot the reference executor runs) once; a dtype conversion (``.half()``) leaves
        them alone: the engine's precision was fixed when it was built."""
        result = super()._apply(fn, recurse)
        device = self.handle.device()
        if device is not None:
            target = fn(torch.empty(0, device=device)).device
            if target != device:
                self.handle.to(target)
        return result

    def forward(self, *args: torch.Tensor):
        if not HAS_OPAQUE_HANDLES or (all(type(a) is torch.Tensor for a in args)
                                      and not torch.compiler.is_compiling()):
            # eager: straight to the handle (the op's dispatch is for tracing and export)
            outputs = self.handle.run(list(args))
        else:
            outputs = torch.ops.torch_trt_ref.execute_engine(list(args), self.handle)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
