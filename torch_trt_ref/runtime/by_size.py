"""``BySize``: a compiled model made of one compiled module per box of input sizes, for a
model whose graph depends on a size inside a declared range (Note [Sizes the trace does not
cover] in size_cover.py)."""

from __future__ import annotations

from typing import Any

import torch

from .size_guard import condition_holds

Box = dict[tuple[int, int], tuple[int, int]]  # (input index, dim) -> (lo, hi) inclusive


class BySize(torch.nn.Module):
    """``forward`` raises eager's error where a box of ``raises`` holds the inputs' sizes
    (sizes where the model itself raises in eager), else runs the first module whose box
    holds them (an empty box holds every size) and whose ``guards`` hold too: conditions
    over several sizes ((code, {symbol: (input index, input name, dim)}); Note [Conditions
    over several sizes] in size_conditions.py) under which that module was traced.
    ``inputs`` names where input ``i`` comes from: a position (int) or a keyword (str).
    ``compile_report`` and ``partition_result`` are those of the first module, the one for
    the traced sizes."""

    def __init__(self, branches: list[tuple[Box, torch.nn.Module]], inputs: list[int | str],
                 raises: list[tuple[Box, str]] = (),
                 guards: list[list[tuple[str, dict]]] | None = None):
        super().__init__()
        self.boxes = [box for box, _ in branches]
        self.branches = torch.nn.ModuleList(module for _, module in branches)
        self.inputs = list(inputs)
        self.raises = list(raises)
        self.guards = [list(g) for g in guards] if guards else [[] for _ in branches]

    @property
    def compile_report(self):
        return self.branches[0].compile_report

    @property
    def partition_result(self):
        return self.branches[0].partition_result

    def _size(self, args: tuple, kwargs: dict, i: int, d: int) -> int:
        where = self.inputs[i]
        value = args[where] if isinstance(where, int) and where < len(args) else kwargs[where]
        return value.shape[d]

    def _holds(self, box: Box, args: tuple, kwargs: dict) -> bool:
        return all(lo <= self._size(args, kwargs, i, d) <= hi for (i, d), (lo, hi) in box.items())

    def _broken(self, guard: list[tuple[str, dict]], args: tuple, kwargs: dict):
        """The first condition of ``guard`` the inputs' sizes break, else None."""
        def size_of(i, name, d):
            return self._size(args, kwargs, i, d)

        return next(((code, sizes) for code, sizes in guard
                     if not condition_holds(code, sizes, size_of)), None)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        for box, why in getattr(self, "raises", ()):  # (modules saved before it had none)
            if self._holds(box, args, kwargs):
                raise RuntimeError(f"the model raises in eager at these input sizes "
                                   f"({box}), so its compiled module does too: {why}")
        guards = getattr(self, "guards", None) or [[] for _ in self.boxes]
        broken = None
        for box, module, guard in zip(self.boxes, self.branches, guards):
            if self._holds(box, args, kwargs):
                why = self._broken(guard, args, kwargs)
                if why is None:
                    return module(*args, **kwargs)
                broken = broken or why
        if broken is not None:
            code, sizes = broken
            shown = ", ".join(f"input {name!r} dim {d} = {self._size(args, kwargs, i, d)}"
                              for i, name, d in sizes.values())
            raise RuntimeError(
                f"input sizes {shown} break the condition {code} under which the model was "
                f"traced, and eager was not run at these sizes at compile time (the condition "
                f"fails at more declared sizes than size cover runs in eager), so no module was "
                f"compiled for them. Compile these sizes on their own (min = opt = max), or "
                f"declare a narrower range")
        sizes = {f"input {i} dim {d}": self._size(args, kwargs, i, d) for i, d in self.boxes[0]}
        raise ValueError(f"input sizes {sizes} are outside the ranges the module was compiled "
                         f"for: {self.boxes}")
