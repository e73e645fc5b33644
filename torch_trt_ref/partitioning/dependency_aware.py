"""Dependency-aware segmentation (seed 000): keep a TensorRT and a PyTorch segment open at
once; finalize one only when a node of the other target depends on it."""

from __future__ import annotations

from .fast import alternate, fast_start, phase_units
from .result import TENSORRT, TORCH, Segment
from .rules import after_min_block_size, merge_adjacent
from .units import UnitGraph

OTHER = {TENSORRT: TORCH, TORCH: TENSORRT}


def walk_order(units: UnitGraph, first: str) -> list[int]:
    """The order the walk visits units: the greedy phases starting with ``first`` one after
    the other, each phase in unit order. A topological order in which every phase is a
    run of consecutive units of one target."""
    phases = phase_units(units, alternate(first))
    return [u for _, phase in phases for u in sorted(phase)]


def dependency_aware_segments(units: UnitGraph, min_block_size: int = 1) -> list[Segment]:
    """Seed 000's algorithm (``seed_walk``) walked in fast's phase order, or in the phase
    order of the other start when that plan is better on every count.

    Fast's start rule (PyTorch first when a PyTorch unit is ready) can cost a segment: a
    PyTorch unit ready at the start and one that reads a TensorRT unit can share a phase
    only when TensorRT goes first. The seed's node-order walk (``linear``'s order) may then
    do better than fast's phases. Both starts are walked; the other start's plan is kept
    only when, after min_block_size and merging, it has no more engines, no more
    segments, every node in TensorRT that the first has (so global's floor holds), and
    fewer engines or segments. So the result is
    never worse than fast's-order walk (and fast), and with min_block_size=1 never has
    more segments than the node-order walk: the greedy phases from a start are the
    fewest among plans that start there, and the node order is such a plan for its
    first unit's target. O(N + E)."""
    first = fast_start(units)
    plan = seed_walk(units, walk_order(units, first))
    if first == TENSORRT:  # no PyTorch unit is ready at the start: the other order is this one
        return plan
    other = seed_walk(units, walk_order(units, TENSORRT))
    (ea, sa, na), (eb, sb, nb) = _counts(other, min_block_size), _counts(plan, min_block_size)
    better = ea <= eb and sa <= sb and (ea, sa) != (eb, sb) and na >= nb
    return other if better else plan


def _counts(plan: list[Segment], min_block_size: int) -> tuple[int, int, set]:
    """(engines, segments, nodes in TensorRT) after min_block_size and merging."""
    final = after_min_block_size(plan, min_block_size)
    engines = [s for s in final if s.target == TENSORRT]
    return len(engines), len(final), {n for s in engines for n in s.nodes}


def seed_walk(units: UnitGraph, order: list[int]) -> list[Segment]:
    """Seed 000's algorithm on units (nodes or fusion groups), walked in ``order``.

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

    Guarantee (no control flow), walked in fast's order: every fast phase lies inside one
    segment of this plan —
    units of one run of the walk share the open segment, and nothing finalizes it in the
    middle of the run. So it has at most fast's segments of each target, and every
    TensorRT engine of fast (a phase of >= min_block_size compute nodes) lies inside one
    of its engines: it runs every node in TensorRT that fast does, and has no more
    engines than fast except where it joins phases that fast demotes to PyTorch for
    min_block_size into an engine (more nodes in TensorRT). The open segments still let
    a phase move after the other target's phase, as in the seed (its lgamma graph: 3
    segments where fast gives 4). ``dependency_aware_segments`` keeps the other start's
    walk only when it is better on every count. ``tests/partitioning/test_strategy_order.py``
    and ``test_properties.py`` check both.

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

    for u in order:
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
