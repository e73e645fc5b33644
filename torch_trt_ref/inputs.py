"""``Input``: the shape (static, a min/opt/max range, or several ranges: one TensorRT
optimization profile each) and dtype of one model input."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Sequence

import torch


@dataclass(frozen=True)
class Input:
    """One model input. ``Input(shape=(1, 3, 224, 224))`` is static;
    ``Input(min_shape=..., opt_shape=..., max_shape=...)`` declares a range, which becomes
    torch.export Dims and a TensorRT optimization profile. ``Input(profiles=[{"min": ...,
    "opt": ..., "max": ...}, ...])`` (Torch-TensorRT 2.14's spelling) declares several
    ranges: one engine with one optimization profile per entry (e.g. prefill and decode);
    the graph is captured over their envelope and the runtime picks a profile per call
    (``runtime.profiles``). ``shared_dims={0: "batch"}`` names dynamic dims: axes of
    different inputs that share a name are one ``torch.export.Dim`` (the same size at every
    call), and must declare the same min/opt/max."""

    shape: tuple[int, ...] | None = None
    min_shape: tuple[int, ...] | None = None
    opt_shape: tuple[int, ...] | None = None
    max_shape: tuple[int, ...] | None = None
    dtype: torch.dtype = torch.float32
    name: str | None = None
    low: float = 0.0
    high: float = 1.0
    # ((min, opt, max), ...) per optimization profile; () for one range
    profiles: tuple = ()
    # ((dim, name), ...): dynamic dims tied to those of other inputs of the same name
    shared_dims: tuple = ()

    def __post_init__(self):
        self._check_fields()
        self._normalize()
        self._check_shared_dims()

    def _check_shared_dims(self) -> None:
        """``shared_dims`` as ((dim, name), ...) sorted by dim: each dim in range and
        dynamic, each name an identifier."""
        given = self.shared_dims
        if isinstance(given, dict):
            given = tuple(given.items())
        if not isinstance(given, tuple) or not all(
                isinstance(p, tuple) and len(p) == 2 for p in given):
            raise ValueError(f"Input: shared_dims is a dict {{dim: name}}, e.g. {{0: 'batch'}}, "
                             f"got {self.shared_dims!r}")
        rank, out = len(self.opt_shape), {}
        for dim, name in given:
            if not isinstance(dim, int) or not -rank <= dim < rank:
                raise ValueError(f"Input: shared_dims key {dim!r} is not a dim of a rank-{rank} "
                                 f"input; accepted: ints in {-rank}..{rank - 1}")
            dim %= rank
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"Input: shared_dims name {name!r} (dim {dim}) must be a "
                                 "Python identifier such as 'batch'")
            if dim not in self.dynamic_dims:
                raise ValueError(
                    f"Input: shared_dims names dim {dim} ({name!r}), which is static (size "
                    f"{self.opt_shape[dim]}); only dynamic dims (min < max) can be shared")
            out[dim] = name
        object.__setattr__(self, "shared_dims", tuple(sorted(out.items())))

    def _normalize(self) -> None:
        if self.profiles:
            if isinstance(self.profiles[0], tuple):  # normalized already (dataclasses.replace)
                for field in ("min_shape", "opt_shape", "max_shape"):
                    object.__setattr__(self, field, None)
                object.__setattr__(self, "profiles", tuple(
                    {"min": a, "opt": b, "max": c} for a, b, c in self.profiles))
            self._set_profiles()
            return
        ranges = (self.min_shape, self.opt_shape, self.max_shape)
        if self.shape is not None:
            if any(r is not None for r in ranges):
                raise ValueError("Input: give either shape=... or min_shape/opt_shape/max_shape")
            shape = _dims(self.shape, "shape")
            object.__setattr__(self, "shape", shape)
            for field in ("min_shape", "opt_shape", "max_shape"):
                object.__setattr__(self, field, shape)
        else:
            if all(r is None for r in ranges):
                raise ValueError("Input: give shape=(...) for a static input, or min_shape, "
                                 "opt_shape and max_shape for a range (or profiles=[...])")
            if any(r is None for r in ranges):
                raise ValueError(
                    "Input: a dynamic input needs all of min_shape, opt_shape and max_shape "
                    f"(got min={self.min_shape}, opt={self.opt_shape}, max={self.max_shape})"
                )
            lo, opt, hi = (_dims(r, f) for r, f in zip(ranges, ("min_shape", "opt_shape",
                                                                  "max_shape")))
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
            raise ValueError(f"Input: negative dimension in {self.opt_shape}; a dim of any "
                             "size is declared by a range: min_shape, opt_shape, max_shape")

    def _check_fields(self) -> None:
        """dtype, low/high and name: what the shape checks do not cover."""
        if not isinstance(self.dtype, torch.dtype):
            raise TypeError(f"Input: dtype must be a torch.dtype (torch.float32, torch.int64, "
                            f"...), got {self.dtype!r}")
        for field in ("low", "high"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"Input: {field} must be a finite number (the range of "
                                 f"example values), got {value!r}")
        if self.low > self.high:
            raise ValueError(f"Input: low={self.low} is above high={self.high}")
        if self.name is not None and not isinstance(self.name, str):
            raise TypeError(f"Input: name must be a str (the forward argument's name) or "
                            f"None, got {self.name!r}")

    def _set_profiles(self) -> None:
        """Normalize ``profiles`` to ((min, opt, max), ...) and set min/opt/max_shape to
        their envelope (the range torch.export captures)."""
        if any(r is not None for r in (self.shape, self.min_shape, self.opt_shape,
                                       self.max_shape)):
            raise ValueError("Input: give either profiles=[...] or shape / min_shape, "
                             "opt_shape, max_shape, not both")
        ranges = []
        for k, entry in enumerate(self.profiles):
            if not isinstance(entry, dict) or not {"min", "opt", "max"} <= set(entry):
                raise ValueError(f"Input: profile {k} must be a dict with keys 'min', 'opt' "
                                 f"and 'max' (shapes), got {entry!r}")
            one = Input(min_shape=entry["min"], opt_shape=entry["opt"],
                        max_shape=entry["max"], dtype=self.dtype)
            ranges.append((one.min_shape, one.opt_shape, one.max_shape))
        if len({len(r[0]) for r in ranges}) != 1:
            raise ValueError(f"Input: the profiles' ranks differ: {[r[0] for r in ranges]}")
        object.__setattr__(self, "profiles", tuple(ranges))
        object.__setattr__(self, "min_shape", tuple(map(min, zip(*(r[0] for r in ranges)))))
        object.__setattr__(self, "opt_shape", ranges[0][1])
        object.__setattr__(self, "max_shape", tuple(map(max, zip(*(r[2] for r in ranges)))))

    @property
    def profile_count(self) -> int:
        return len(self.profiles) or 1

    def profile(self, index: int) -> "Input":
        """This input as declared for optimization profile ``index`` (a single range)."""
        if not self.profiles:
            return self
        lo, opt, hi = self.profiles[index]
        shared = tuple((d, n) for d, n in self.shared_dims if lo[d] != hi[d])
        return Input(min_shape=lo, opt_shape=opt, max_shape=hi, dtype=self.dtype,
                     name=self.name, low=self.low, high=self.high, shared_dims=shared)

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
        if self.profiles:
            return "; ".join(f"profile {k}: " + self.profile(k).describe()
                             for k in range(len(self.profiles)))
        if not self.is_dynamic:
            return f"{tuple(self.opt_shape)} {self.dtype}"
        return f"min={self.min_shape} opt={self.opt_shape} max={self.max_shape} {self.dtype}"


def _dims(shape, field: str) -> tuple[int, ...]:
    """A shape as a tuple of ints: a sequence of ints (a torch.Size too); anything else,
    a float dim or one number for a shape, is a TypeError naming the field."""
    try:
        if isinstance(shape, (str, bytes)):
            raise TypeError
        return tuple(int(d) if isinstance(d, torch.SymInt) else operator.index(d)
                     for d in shape)
    except TypeError:
        raise TypeError(f"Input: {field} must be a sequence of ints, like (1, 3, 224, 224); "
                        f"got {shape!r}") from None
