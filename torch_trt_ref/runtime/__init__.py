"""The runtime: engines, their executors (TensorRT, reference), the engine module, and
``weight_streaming`` (the budget of engine weights kept on the device)."""

from .streaming import WeightStreamingContext, weight_streaming  # noqa: F401

__all__ = ["weight_streaming", "WeightStreamingContext"]
