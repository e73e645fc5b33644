"""Tensor specs of network inputs: static shapes, or min/opt/max ranges computed from the
symbolic shape expressions that torch.export attached to the graph (D7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import sympy
import torch


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: torch.dtype
    min_shape: tuple[int, ...]
    opt_shape: tuple[int, ...]
    max_shape: tuple[int, ...]
    # ((min, opt, max), ...) per optimization profile when the compile declared several
    # (Input(profiles=...)); min/opt/max_shape above are then their envelope
    profiles: tuple = ()

    @property
    def is_dynamic(self) -> bool:
        return self.min_shape != self.max_shape

    @property
    def trt_shape(self) -> tuple[int, ...]:
        """Shape for ``add_input``: -1 wherever the range is not a single value."""
        return tuple(-1 if a != c else a for a, c in zip(self.min_shape, self.max_shape))

    def contains(self, shape) -> bool:
        return len(shape) == len(self.min_shape) and all(
            a <= d <= c for d, a, c in zip(shape, self.min_shape, self.max_shape))

    def profile_range(self, index: int) -> tuple[tuple[int, ...], ...]:
        """(min, opt, max) of optimization profile ``index``."""
        if not self.profiles:
            return self.min_shape, self.opt_shape, self.max_shape
        return self.profiles[index]

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "dtype": str(self.dtype).removeprefix("torch."),
               "min": list(self.min_shape), "opt": list(self.opt_shape),
               "max": list(self.max_shape)}
        if self.profiles:
            out["profiles"] = [{"min": list(a), "opt": list(b), "max": list(c)}
                               for a, b, c in self.profiles]
        return out


SymbolRanges = Mapping[sympy.Symbol, tuple[int, int, int]]


def dim_range(dim: Any, ranges: SymbolRanges) -> tuple[int, int, int]:
    """(min, opt, max) of one dimension: an int, or a SymInt whose expression is evaluated
    at the min/opt/max of its symbols (shape expressions are monotone in practice)."""
    if isinstance(dim, int):
        return dim, dim, dim
    expr = dim.node.expr if isinstance(dim, torch.SymInt) else dim
    if isinstance(expr, (int, sympy.Integer)):
        return int(expr), int(expr), int(expr)
    missing = [s for s in expr.free_symbols if s not in ranges]
    if missing:
        raise ValueError(
            f"cannot bound dimension {expr}: symbols {missing} have no declared range "
            "(data-dependent sizes need an output allocator)")
    values = [int(expr.subs({s: r[i] for s, r in ranges.items()})) for i in range(3)]
    return min(values), values[1], max(values)


def spec_from_fake(name: str, fake: torch.Tensor, ranges: SymbolRanges,
                   profile_ranges: tuple[SymbolRanges, ...] = ()) -> TensorSpec:
    """The spec of a tensor entering an engine; with ``profile_ranges`` (the symbol ranges
    of each optimization profile) it also holds the tensor's range in each profile."""
    dims = [dim_range(d, ranges) for d in fake.shape]
    profiles = tuple(
        tuple(tuple(r[k] for r in (dim_range(d, one) for d in fake.shape)) for k in range(3))
        for one in profile_ranges)
    return TensorSpec(name, fake.dtype, tuple(d[0] for d in dims), tuple(d[1] for d in dims),
                      tuple(d[2] for d in dims), profiles)
