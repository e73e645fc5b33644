"""Adjacency ("fast") partitioning, the greedy phase scheduler it shares with the global and
hierarchical strategies, and the naive linear traversal kept as a baseline."""

from __future__ import annotations

from collections import deque
from typing import Callable

from .result import TENSORRT, TORCH, Segment
from .units import UnitGraph

# Picks the target of the next phase from the ready queues (None: all queues are empty).
NextTarget = Callable[[dict[str, deque], str | None], str | None]


def greedy_phases(units: UnitGraph, next_target: NextTarget) -> list[Segment]:
    """Schedule units in phases (``phase_units``) and make each phase a segment."""
    return [units.segment(target, phase) for target, phase in phase_units(units, next_target)]


def phase_units(units: UnitGraph, next_target: NextTarget) -> list[tuple[str, list[int]]]:
    """Schedule units in phases. A phase has one target and takes every ready unit of that
    target, including units that become ready during the phase; when no unit of the
    target is ready the phase ends and ``next_target`` picks the next one. Returns
    (target, units in the order taken) per phase. Each unit is visited once and each edge
    once: O(N + E)."""
    remaining = [len(d) for d in units.deps]
    ready: dict[str, deque] = {t: deque() for t in dict.fromkeys(units.targets)}
    for u in range(len(units)):
        if remaining[u] == 0:
            ready[units.targets[u]].append(u)
    phases: list[tuple[str, list[int]]] = []
    target = next_target(ready, None)
    while target is not None:
        queue, phase = ready[target], []
        while queue:
            u = queue.popleft()
            phase.append(u)
            for v in units.users[u]:
                remaining[v] -= 1
                if remaining[v] == 0:
                    ready[units.targets[v]].append(v)
        phases.append((target, phase))
        target = next_target(ready, target)
    return phases


def alternate(first: str) -> NextTarget:
    """Two targets: start with ``first`` (if anything of it is ready), then alternate."""

    def pick(ready: dict[str, deque], current: str | None) -> str | None:
        ready_targets = [t for t, q in ready.items() if q]
        if not ready_targets:
            return None
        if current is None and first in ready_targets:
            return first
        others = [t for t in ready_targets if t != current]
        return others[0] if others else current

    return pick


def fast_segments(units: UnitGraph) -> list[Segment]:
    """Adjacency partitioning as Torch-TensorRT's fast partitioner does it (torch.fx
    ``_SplitterBase.put_nodes_into_subgraphs`` with ``FxNetAccFusionsFinder``).

    Algorithm: greedy phases (``greedy_phases``) alternating between TensorRT and PyTorch;
    the first phase is PyTorch when some PyTorch unit is ready at the start (a node fed
    only by graph inputs and weights), otherwise TensorRT. Fusion groups are units, so
    they stay whole across boundaries.

    Assumptions: two targets. The phase closure moves independent nodes across a boundary
    (seed 000's lgamma graph: 4 segments where the linear traversal makes 7). The plan has
    the fewest segments among plans starting with the chosen target; the start rule can
    cost one segment against the optimum (global tries both starts).

    Complexity: O(N + E) time and memory."""
    return greedy_phases(units, alternate(fast_start(units)))


def fast_start(units: UnitGraph) -> str:
    """The target of fast's first phase: PyTorch when a PyTorch unit is ready at the start
    (it reads only graph inputs and weights), else TensorRT."""
    return TORCH if any(units.targets[u] == TORCH and not units.deps[u]
                        for u in range(len(units))) else TENSORRT


def linear_segments(units: UnitGraph) -> list[Segment]:
    """The naive linear traversal of seed 000, kept as a baseline: walk units in order and
    start a new segment whenever the target changes. O(N)."""
    segments: list[Segment] = []
    for u in range(len(units)):
        target = units.targets[u]
        if segments and segments[-1].target == target:
            segments[-1].nodes.extend(units.nodes[u])
        else:
            segments.append(Segment(target, list(units.nodes[u])))
    return segments
