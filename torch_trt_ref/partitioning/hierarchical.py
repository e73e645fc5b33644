"""Hierarchical (multi-backend) partitioning: every node goes to the highest-priority backend
that accepts it (e.g. tensorrt > inductor > torch); non-TensorRT accelerator segments run
through ``torch.compile`` with that backend."""

from __future__ import annotations

import warnings
from collections import deque

import torch
from torch.fx import GraphModule, Node

from ..settings import CompilationSettings, matches_op
from .capability import BOOKKEEPING
from .fast import greedy_phases
from .result import TENSORRT, TORCH, Segment
from .units import UnitGraph


def backend_priority(settings: CompilationSettings) -> tuple[str, ...]:
    """``settings.backend_priority`` with torch appended when missing (it accepts all)."""
    order = tuple(dict.fromkeys(settings.backend_priority))
    return order if TORCH in order else order + (TORCH,)


def accepts(node: Node, backend: str, capable: bool, settings: CompilationSettings) -> bool:
    """Does ``backend`` accept ``node``? torch: always. tensorrt: the capability check passed
    (``capable``) and, when ``backend_support_map`` has a "tensorrt" entry, the op is in it.
    Any other backend: the op is in its ``backend_support_map`` set; getitem and sym_size
    bookkeeping are accepted by every backend. Ops in torch_executed_ops run in torch."""
    if backend == TORCH:
        return True
    support = (settings.backend_support_map or {}).get(backend)
    if backend == TENSORRT:
        return capable and (support is None or matches_op(node.target, support))
    if matches_op(node.target, settings.torch_executed_ops):
        return False
    return node.target in BOOKKEEPING or (support is not None
                                          and matches_op(node.target, support))


def _earliest_ready(ready: dict[str, deque], current: str | None) -> str | None:
    """The target of the ready unit that comes first in the unit order."""
    heads = [(q[0], t) for t, q in ready.items() if q]
    return min(heads)[1] if heads else None


def hierarchical_segments(units: UnitGraph) -> list[Segment]:
    """Adjacency partitioning over any number of backends.

    Algorithm: units carry their backend (highest priority accepting every member); greedy
    phases (``fast.greedy_phases``) take every ready unit of the current backend, and the
    next phase goes to the backend of the earliest ready unit in topological order.
    Segments are tagged with the backend; stitching names them ``_run_on_<backend>_<i>``.

    Assumptions: a backend's support set is a list of op names (OpOverload or packet);
    ops it lacks fall through to the next backend. Complexity: O(N + E + N * B) for B
    backends (the choice of the next phase looks at one queue head per backend)."""
    return greedy_phases(units, _earliest_ready)


class BackendSegment(torch.nn.Module):
    """A segment compiled by ``torch.compile(backend=...)``. If that backend cannot compile
    it on this machine the segment runs eagerly, with a warning saying so; ``compiled``
    tells which happened (None before the first call)."""

    def __init__(self, name: str, module: GraphModule, backend: str):
        super().__init__()
        self.name, self.backend, self.module = name, backend, module
        self._compiled = torch.compile(module, backend=backend, dynamic=False)
        self.compiled: bool | None = None
        self.error: str | None = None

    def extra_repr(self) -> str:
        return f"backend={self.backend}, compiled={self.compiled}"

    def forward(self, *args):
        if self.compiled is False:
            return self.module(*args)
        try:
            out = self._compiled(*args)
        except Exception as err:  # noqa: BLE001 (any backend failure falls back to eager)
            self.compiled, self.error = False, f"{type(err).__name__}: {err}"
            warnings.warn(f"{self.name}: backend {self.backend!r} could not compile this "
                          f"segment on this machine ({self.error}); running it eagerly in "
                          "PyTorch", stacklevel=2)
            return self.module(*args)
        self.compiled = True
        return out


def wrap_backend_segment(name: str, submodule: GraphModule, target: str) -> torch.nn.Module:
    """The module that runs a segment of a non-TensorRT accelerator backend. ``target`` is
    a ``torch.compile`` backend name ("inductor", "aot_eager", ...)."""
    import torch._dynamo

    available = torch._dynamo.list_backends(exclude_tags=())
    if target not in available:
        raise ValueError(f"{name}: backend {target!r} in backend_priority is not a "
                         f"torch.compile backend; available: {sorted(available)}")
    return BackendSegment(name, submodule, target)
