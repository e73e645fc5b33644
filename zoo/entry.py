"""``ZooEntry``: one zoo model — how to build it, its example inputs, its optional dynamic
input specs and its max abs tolerance per precision (the fallback when float64 is
impossible)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

Args = tuple[tuple[Any, ...], dict[str, Any]]

# Max abs error vs eager fp32 that a compile in each precision may show, for a model whose
# outputs are O(1); entries override these when their outputs are larger. Not the pass
# criterion: accuracy is judged against eager float64 (torch_trt_ref.accuracy, docs/zoo.md);
# a tolerance decides only for a model that cannot run in float64, and is recorded.
DEFAULT_TOLERANCES = {"fp32": 1e-3, "fp16": 5e-2, "bf16": 2e-1}


def compile_precision(precision: str) -> str:
    """The compile precision of a zoo precision name: a compile precision is itself; a
    quantization format (``QUANT_FORMATS``) compiles in fp32 around its Q/DQ nodes and is
    compared with the eager quantized model, so the fp32 tolerance applies too."""
    # imported here: the gate's servers import the zoo with the library of an older base
    # commit (Note [What the measurement code may import] in perf/gate/measure.py)
    from torch_trt_ref.settings import QUANT_FORMATS

    return "fp32" if precision in QUANT_FORMATS else precision


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model. ``factory()`` returns the model in eval mode with random weights
    (seeded, nothing downloaded); ``inputs()`` returns ``(args, kwargs)`` of example tensors;
    ``dynamic`` is an optional ``(args, kwargs)`` of ``torch_trt_ref.Input`` specs;
    ``compile_settings`` are settings every harness compile of this model uses."""

    name: str
    factory: Callable[[], torch.nn.Module]
    inputs: Callable[[], Args]
    dynamic: Args | None = None
    tolerances: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    tags: tuple[str, ...] = ()
    description: str = ""
    compile_settings: dict[str, Any] = field(default_factory=dict)  # e.g. min_block_size

    def __post_init__(self):
        object.__setattr__(self, "factory", _seeded_eval(self.factory))

    @staticmethod
    def weight_bytes(model: torch.nn.Module) -> int:
        """Bytes of the model's parameters and buffers, counting tied storage once."""
        seen: set[tuple[int, int]] = set()
        total = 0
        tensors = list(model.parameters()) + list(model.buffers())
        for t in tensors:
            key = (t.untyped_storage().data_ptr(), t.storage_offset())
            if key in seen:
                continue
            seen.add(key)
            total += t.numel() * t.element_size()
        return total

    def tolerance(self, precision: str) -> float:
        precision = compile_precision(precision)
        return self.tolerances.get(precision, DEFAULT_TOLERANCES[precision])


def _seeded_eval(build: Callable[[], torch.nn.Module]) -> Callable[[], torch.nn.Module]:
    """Wrap a model constructor so it runs under ``torch.manual_seed(0)`` and returns the
    model in eval mode: the same weights on every call."""
    if getattr(build, "_zoo_seeded", False):
        return build

    def factory() -> torch.nn.Module:
        torch.manual_seed(0)
        return build().eval()

    factory._zoo_seeded = True
    factory.__name__ = getattr(build, "__name__", "factory")
    return factory


def seeded(seed: int = 0) -> torch.Generator:
    """A CPU generator for deterministic example inputs."""
    return torch.Generator().manual_seed(seed)


def tolerances(**overrides: float) -> dict[str, float]:
    return {**DEFAULT_TOLERANCES, **overrides}
