"""``InputDtypeGuard``: a compiled module refuses inputs of another dtype than it was
compiled for, as eager PyTorch would, instead of casting them silently."""

from __future__ import annotations

from typing import Any

import torch


class InputDtypeGuard:
    """A forward pre-hook (``register_forward_pre_hook(..., with_kwargs=True)``) on a
    compiled module. ``positional``: (name, dtype) per positional input; ``keyword``: name
    -> dtype. A tensor of another dtype raises TypeError naming the input, the dtype it
    got and the one it was compiled for.

    Why an error and not a cast: an int64 or float64 tensor into a float32 model raises in
    eager PyTorch (or computes in that dtype); a compiled module that quietly cast it would
    hide the mistake and give results eager never gives."""

    def __init__(self, positional: list[tuple[str, torch.dtype]],
                 keyword: dict[str, torch.dtype]):
        self.positional = list(positional)
        self.by_name = {**dict(positional), **keyword}  # a positional one may come by name

    def __call__(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        for (name, dtype), value in zip(self.positional, args):
            _check(name, dtype, value)
        for name, value in kwargs.items():
            if name in self.by_name:
                _check(name, self.by_name[name], value)


def _check(name: str, dtype: torch.dtype, value: Any) -> None:
    if isinstance(value, torch.Tensor) and value.dtype != dtype:
        raise TypeError(
            f"input {name!r}: got a {value.dtype} tensor, but the module was compiled for "
            f"{dtype}. Pass a {dtype} tensor (e.g. value.to({dtype})), or compile again with "
            f"an example of dtype {value.dtype} (torch_trt_ref.Input(..., dtype={value.dtype})).")


class SharedDimsGuard:
    """A forward pre-hook like ``InputDtypeGuard``: axes declared as one size
    (``Input(shared_dims={0: "batch"})``) must have one size at every call; otherwise a
    ValueError names the axes and their sizes. ``ties``: name -> [(input name, position or
    None, dim), ...]."""

    def __init__(self, ties: dict[str, list[tuple[str, int | None, int]]]):
        self.ties = ties

    def __call__(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        for tag, axes in self.ties.items():
            sizes = []
            for name, position, dim in axes:
                value = (args[position] if position is not None and position < len(args)
                         else kwargs.get(name))
                if isinstance(value, torch.Tensor) and value.dim() > dim:
                    sizes.append((name, dim, value.shape[dim]))
            if len({size for _, _, size in sizes}) > 1:
                shown = ", ".join(f"input {n!r} dim {d} is {s}" for n, d, s in sizes)
                raise ValueError(f"shared dim {tag!r}: {shown}; these axes were compiled as "
                                 "one size (Input(shared_dims=...)), so they must be equal")
