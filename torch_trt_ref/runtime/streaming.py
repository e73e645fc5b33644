"""``weight_streaming(module)``: the budget of engine weights a compiled module keeps on
its device, the rest streamed per layer by the reference executor (the peer's
``torch_tensorrt.runtime.weight_streaming``; Note [Which weights stream] in
reference/weight_placement.py)."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from .module import EngineModule


class WeightStreamingContext:
    """``device_budget``: bytes of engine weights kept on the device (0 .. ``total_device_
    budget``), split over the module's engines in order, each taking what it can; setting
    it re-places the weights. ``resident_bytes`` / ``streamed_bytes``: where they are now;
    ``copied_bytes``: host -> device bytes the calls copied since the budget was set."""

    def __init__(self, module: torch.nn.Module):
        self.handles = [m.handle for m in module.modules() if isinstance(m, EngineModule)]
        settings = getattr(getattr(module, "compile_report", None), "settings", {}) or {}
        if not settings.get("enable_weight_streaming"):
            raise ValueError("weight_streaming takes a module compiled with "
                             "enable_weight_streaming=True (torch_trt_ref.compile(..., "
                             "enable_weight_streaming=True))")
        self.sizes = [h.streamable_bytes() for h in self.handles]
        self._budget = self.total_device_budget

    @property
    def total_device_budget(self) -> int:
        """Every engine weight byte: the budget at which nothing streams."""
        return sum(self.sizes)

    @property
    def device_budget(self) -> int:
        return self._budget

    @device_budget.setter
    def device_budget(self, budget: int) -> None:
        if isinstance(budget, bool) or not isinstance(budget, int) or not (
                0 <= budget <= self.total_device_budget):
            raise ValueError(f"device_budget must be an int of bytes in 0.."
                             f"{self.total_device_budget} (total_device_budget), got {budget!r}")
        left = budget
        for handle, size in zip(self.handles, self.sizes):
            share = min(left, size)
            handle.set_weight_budget(None if budget == self.total_device_budget else share)
            left -= share
        for plan in self._plans():  # copied_bytes counts from here
            plan.copied_bytes = 0
        self._budget = budget

    def _plans(self):
        return [h.streaming for h in self.handles if h.streaming is not None]

    @property
    def resident_bytes(self) -> int:
        streamed = sum(p.streamed_bytes for p in self._plans())
        return self.total_device_budget - streamed

    @property
    def streamed_bytes(self) -> int:
        return sum(p.streamed_bytes for p in self._plans())

    @property
    def copied_bytes(self) -> int:
        return sum(p.copied_bytes for p in self._plans())


@contextlib.contextmanager
def weight_streaming(module: torch.nn.Module) -> Iterator[WeightStreamingContext]:
    """``with weight_streaming(compiled) as ctx: ctx.device_budget = n``; on exit the
    budget returns to what it was on entry."""
    ctx = WeightStreamingContext(module)
    entry = [h.weight_budget for h in ctx.handles]
    try:
        yield ctx
    finally:
        for handle, budget in zip(ctx.handles, entry):
            handle.set_weight_budget(budget)
