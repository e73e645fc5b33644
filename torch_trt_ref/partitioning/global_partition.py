"""Global partitioning: the plan with the fewest segments, i.e. the fewest switches between
TensorRT and PyTorch."""

from __future__ import annotations

from .fast import alternate, greedy_phases
from .result import TENSORRT, TORCH, Segment
from .rules import apply_min_block_size, merge_adjacent
from .units import UnitGraph


def global_segments(units: UnitGraph, min_block_size: int = 1) -> list[Segment]:
    """Fewest segments over all valid plans (two targets).

    A plan is a sequence of segments, each of one target, in which every segment only
    reads values of earlier segments; with two targets it alternates. Greedy phases
    (``fast.greedy_phases``: take every ready unit of the current target, then switch)
    started from target c produce the fewest segments among plans starting with c: by
    induction, after k phases the greedy plan has placed a superset of what any other
    plan starting with c has placed after k segments. Trying both starts therefore gives
    the global minimum. Both plans are scored after min_block_size and merging (the
    driver applies the same rules), ties go to fewer TensorRT engines, then to starting
    with TensorRT.

    This replaces torch.fx's CapabilityBasedPartitioner, which Torch-TensorRT uses: that
    one grows partitions of supported nodes greedily and guarantees no cycles, but not the
    minimum count; this one is exact, simpler, and independent of torch versions.

    Complexity: O(N + E) (two greedy passes)."""
    best_key, best = None, []
    for i, first in enumerate((TENSORRT, TORCH)):
        segments = greedy_phases(units, alternate(first))
        scored = merge_adjacent(apply_min_block_size(
            [Segment(s.target, list(s.nodes)) for s in segments],
            min_block_size))
        key = (len(scored), sum(s.target == TENSORRT for s in scored), i)
        if best_key is None or key < best_key:
            best_key, best = key, segments
    return best
