"""Dependency-aware segmentation (seed 000): keep a TensorRT and a PyTorch segment open at
once; finalize one only when a node of the other target depends on it."""

from __future__ import annotations

from .fast import alternate, fast_start, phase_units
from .result import TENSORRT, TORCH, Segment
from .rules import merge_adjacent
from .units import UnitGraph

OTHER = {TENSORRT: TORCH, TORCH: TENSORRT}


def walk_order(units: UnitGraph) -> list[int]:
    """The order the walk visits units: fast's greedy phases one after the other, each
    phase in unit order. A topological order in which every fast phase is a run of
    consecutive units of one target."""
    phases = phase_units(units, alternate(fast_start(units)))
    return [u for _, phase in phases for u in sorted(phase)]


def dependency_aware_segments(units: UnitGraph) -> list[Segment]:
    """Seed 000's algorithm on units (nodes or fusion groups), walked in ``walk_order``.

    Algorithm: one open segment per target. A unit of target t whose inputs come from the
    open segment of the other target first finalizes (emits) that segment, then joins the
    open segment of t. Invariant: the two open segments never depend on each other, so
    either may be emitted first and every emitted segment only reads from earlier ones.
    At the end both are emitted, the one of the last emitted segment's target first (so
    it merges), and adjacent segments of one target are merged unless marked
    do_not_merge. A unit holding control flow (a higher-order op such as torch.cond) first
    finalizes the open segments it reads from, then becomes its own do_not_merge segment,
    as seed 000 does for conditionals.

    Why this walk order: the seed walks the graph in node order, and then finalizes a
    segment as soon as a node of the other target reads it, even when later nodes of the
    segment's target do not depend on anything after it (fast's phases would still take
    them). On the T5-small encoder with add forced to PyTorch and min_block_size=5 that
    gave 21 TensorRT segments against fast's 20. Walked in fast's phase order, a segment
    is only finalized by a unit of the next phase, so it is never finalized before the
    greedy phase it holds is complete.

    Guarantee (no control flow): every fast phase lies inside one segment of this plan —
    units of one run of the walk share the open segment, and nothing finalizes it in the
    middle of the run. So it has at most fast's segments of each target, and every
    TensorRT engine of fast (a phase of >= min_block_size compute nodes) lies inside one
    of its engines: it runs every node in TensorRT that fast does, and has no more
    engines than fast except where it joins phases that fast demotes to PyTorch for
    min_block_size into an engine (more nodes in TensorRT). The open segments still let
    a phase move after the other target's phase, as in the seed (its lgamma graph: 3
    segments where fast gives 4). ``tests/partitioning/test_strategy_order.py`` checks it.

    Assumptions: two targets (TensorRT and PyTorch); the unit order is topological.
    Complexity: O(N + E): the phases, then each unit and edge looked at once, each unit
    emitted once."""
    out: list[Segment] = []
    open_units: dict[str, list[int]] = {TENSORRT: [], TORCH: []}
    where: list[str | None] = [None] * len(units)  # target of the open segment holding u

    def finalize(target: str) -> None:
        if open_units[target]:
            out.append(units.segment(target, open_units[target]))
            for u in open_units[target]:
                where[u] = None
            open_units[target] = []

    for u in walk_order(units):
        target = units.targets[u]
        if units.control_flow[u]:
            for t in (TENSORRT, TORCH):
                if any(where[d] == t for d in units.deps[u]):
                    finalize(t)
            out.append(units.segment(target, [u], do_not_merge=True))
            continue
        if any(where[d] == OTHER[target] for d in units.deps[u]):
            finalize(OTHER[target])
        open_units[target].append(u)
        where[u] = target
    last = out[-1].target if out else TENSORRT
    finalize(last)
    finalize(OTHER[last])
    return merge_adjacent(out)
