"""``Input``: the shape (static or a min/opt/max range) and dtype of one model input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch


@dataclass(frozen=True)
class Input:
    """One model input. ``Input(shape=(1, 3, 224, 224))`` is static;
    ``Input(min_shape=..., opt_shape=..., max_shape=...)`` declares a range, which becomes
    torch.export Dims and a TensorRT optimization profile."""

    shape: tuple[int, ...] | None = None
    min_shape: tuple[int, ...] | None = None
    opt_shape: tuple[int, ...] | None = None
    max_shape: tuple[int, ...] | None = None
    dtype: torch.dtype = torch.float32
    name: str | None = None
    low: float = 0.0
    high: float = 1.0

    def __post_init__(self):
        ranges = (self.min_shape, self.opt_shape, self.max_shape)
        if self.shape is not None:
            if any(r is not None for r in ranges):
                raise ValueError("Input: give either shape=... or min_shape/opt_shape/max_shape")
            shape = tuple(int(d) for d in self.shape)
            object.__setattr__(self, "shape", shape)
            for field in ("min_shape", "opt_shape", "max_shape"):
                object.__setattr__(self, field, shape)
        else:
            if any(r is None for r in ranges):
                raise ValueError(
                    "Input: a dynamic input needs all of min_shape, opt_shape and max_shape "
                    f"(got min={self.min_shape}, opt={self.opt_shape}, max={self.max_shape})"
                )
            lo, opt, hi = (tuple(int(d) for d in r) for r in ranges)
            if not len(lo) == len(opt) == len(hi):
                raise ValueError(f"Input: min/opt/max ranks differ: {lo}, {opt}, {hi}")
            for i, (a, b, c) in enumerate(zip(lo, opt, hi)):
                if not 0 <= a <= b <= c:
                    raise ValueError(
                        f"Input: dim {i} needs 0 <= min <= opt <= max, got {a}, {b}, {c}"
                    )
            object.__setattr__(self, "min_shape", lo)
            object.__setattr__(self, "opt_shape", opt)
            object.__setattr__(self, "max_shape", hi)
        if any(d < 0 for d in self.opt_shape):
            raise ValueError(f"Input: negative dimension in {self.opt_shape}")

    @classmethod
    def from_tensor(cls, tensor: torch.Tensor, name: str | None = None) -> "Input":
        return cls(shape=tuple(tensor.shape), dtype=tensor.dtype, name=name)

    @property
    def is_dynamic(self) -> bool:
        return self.min_shape != self.max_shape

    @property
    def dynamic_dims(self) -> list[int]:
        return [i for i, (a, c) in enumerate(zip(self.min_shape, self.max_shape)) if a != c]

    def example(self, shape: Sequence[int] | None = None, device="cpu") -> torch.Tensor:
        """A random tensor of ``shape`` (default: opt_shape) and this input's dtype."""
        shape = tuple(shape or self.opt_shape)
        if self.dtype == torch.bool:
            return torch.rand(shape, device=device) > 0.5
        if not self.dtype.is_floating_point:
            return torch.randint(int(self.low), max(int(self.high), int(self.low) + 1), shape,
                                 dtype=self.dtype, device=device)
        return (torch.rand(shape, device=device) * (self.high - self.low) + self.low).to(self.dtype)

    def contains(self, shape: Sequence[int]) -> bool:
        return len(shape) == len(self.min_shape) and all(
            a <= d <= c for d, a, c in zip(shape, self.min_shape, self.max_shape)
        )

    def describe(self) -> str:
        if not self.is_dynamic:
            return f"{tuple(self.opt_shape)} {self.dtype}"
        return f"min={self.min_shape} opt={self.opt_shape} max={self.max_shape} {self.dtype}"
