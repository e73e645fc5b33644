"""Declarative conformance cases: one ``Case`` per op sample, with tensor arguments
described by ``T`` (a model input) or ``W`` (a weight, captured as a constant)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

FLOATS = (torch.float32, torch.float16, torch.bfloat16)
INTS = (torch.int32, torch.int64)
ALL = FLOATS + INTS
# (atol, rtol) per dtype. Not the pass criterion: float results are judged against eager
# float64 (torch_trt_ref.accuracy); these apply only to cells without a float64 reference
# (no float64 kernel, or an op that pins its output dtype). Integer and bool are exact.
DEFAULT_TOL = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (6e-2, 2e-2),
}


@dataclass(frozen=True)
class T:
    """A tensor input. ``dtype=None`` means the dtype under test. ``dynamic`` lists the
    dims that vary in the dynamic variant (default: dim 0 when rank > 0)."""

    shape: tuple[int, ...]
    dtype: torch.dtype | None = None
    low: float = -2.0
    high: float = 2.0
    dynamic: tuple[int, ...] | None = None
    values: Any = None  # explicit values (edge cases); shape is then ignored

    def make(self, dtype: torch.dtype, shape: tuple[int, ...] | None = None,
             seed: int = 0) -> torch.Tensor:
        dtype = self.dtype or dtype
        if self.values is not None:
            return torch.tensor(self.values).to(dtype)
        g = torch.Generator().manual_seed(seed)
        shape = tuple(shape if shape is not None else self.shape)
        if dtype == torch.bool:
            return torch.rand(shape, generator=g) > 0.5
        if not dtype.is_floating_point:
            return torch.randint(int(self.low), int(self.high) + 1, shape, generator=g).to(dtype)
        return (torch.rand(shape, generator=g) * (self.high - self.low) + self.low).to(dtype)

    def dynamic_dims(self) -> tuple[int, ...]:
        if self.values is not None:
            return ()
        if self.dynamic is not None:
            return self.dynamic
        return (0,) if len(self.shape) > 0 else ()


@dataclass(frozen=True)
class W(T):
    """A tensor argument captured as a weight (get_attr constant), never dynamic."""

    def dynamic_dims(self) -> tuple[int, ...]:
        return ()


@dataclass(frozen=True)
class Case:
    """One op sample. ``xfail`` maps a dtype, "dynamic", or (dtype, "dynamic") to the
    reason the cell is a known gap; ``tol`` overrides (atol, rtol) per dtype for cells without
    a float64 reference (see ``DEFAULT_TOL``)."""

    op: Any
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    dtypes: tuple[torch.dtype, ...] = FLOATS
    dynamic: bool = True
    static: bool = True  # False: the op only exists with symbolic shapes (SymInt ops)
    tol: dict = field(default_factory=dict)
    xfail: dict = field(default_factory=dict)
    name: str = ""
    check_op: Any = None  # op that must appear in the converted graph (default: op)
    # dynamic ranges: conformance/runner.py _ranges (a delta: [max(2, size - delta), size + 2]
    # for every dim, for ops whose index values or k need a larger min than 1)
    min_shape_delta: int | None = None
    # export dynamic dims as Dim.DYNAMIC, as compile() does for Input ranges, instead of
    # named Dims: for ops with shape guards export cannot prove over the whole range (it
    # raises ConstraintViolationError on a named Dim, e.g. ceil_mode pooling's last window)
    infer_dims: bool = False
    # compile() settings, e.g. disabled_decompositions to keep an op the default lowering
    # decomposes (its converter serves graphs whose user disabled that decomposition)
    settings: dict = field(default_factory=dict)

    @property
    def target(self):
        return self.check_op or self.op

    def tolerance(self, dtype: torch.dtype) -> tuple[float, float]:
        return self.tol.get(dtype, DEFAULT_TOL.get(dtype, (0.0, 0.0)))

    def xfail_reason(self, dtype: torch.dtype, dynamic: bool) -> str | None:
        for key in ((dtype, "dynamic") if dynamic else None, "dynamic" if dynamic else None,
                    dtype):
            if key is not None and key in self.xfail:
                return self.xfail[key]
        return None

    def tensor_args(self) -> list[tuple[int, T]]:
        return [(i, a) for i, a in enumerate(self.args) if isinstance(a, T)]
