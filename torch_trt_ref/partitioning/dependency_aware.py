"""Dependency-aware segmentation (seed 000): keep a TensorRT and a PyTorch segment open at
once; finalize one only when a node of the other target depends on it."""

from __future__ import annotations

from .result import TENSORRT, TORCH, Segment
from .rules import merge_adjacent
from .units import UnitGraph


def dependency_aware_segments(units: UnitGraph) -> list[Segment]:
    """Seed 000's algorithm on units (nodes or fusion groups) in topological order.

    Algorithm: one open segment per target. A unit of target t whose inputs come from the
    open segment of the other target first finalizes (emits) that segment, then joins the
    open segment of t. Invariant: the two open segments never depend on each other, so
    either may be emitted first and every emitted segment only reads from earlier ones.
    At the end both are emitted (the one that started first goes first), and adjacent
    segments of one target are merged unless marked do_not_merge. A unit holding control
    flow (a higher-order op such as torch.cond) first finalizes the open segments it reads
    from, then becomes its own do_not_merge segment, as seed 000 does for conditionals.

    Assumptions: two targets (TensorRT and PyTorch); the unit order is topological.
    Complexity: O(N + E): each unit and edge is looked at once, each unit emitted once."""
    out: list[Segment] = []
    open_units: dict[str, list[int]] = {TENSORRT: [], TORCH: []}
    where: list[str | None] = [None] * len(units)  # target of the open segment holding u

    def finalize(target: str) -> None:
        if open_units[target]:
            out.append(units.segment(target, open_units[target]))
            for u in open_units[target]:
                where[u] = None
            open_units[target] = []

    for u in range(len(units)):
        target = units.targets[u]
        if units.control_flow[u]:
            for t in (TENSORRT, TORCH):
                if any(where[d] == t for d in units.deps[u]):
                    finalize(t)
            out.append(units.segment(target, [u], do_not_merge=True))
            continue
        other = TORCH if target == TENSORRT else TENSORRT
        if any(where[d] == other for d in units.deps[u]):
            finalize(other)
        open_units[target].append(u)
        where[u] = target
    for t in sorted(open_units, key=lambda t: open_units[t][0] if open_units[t] else 0):
        finalize(t)
    return merge_adjacent(out)
