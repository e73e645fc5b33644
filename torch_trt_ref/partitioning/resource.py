"""Resource partitioning (seed 002): split TensorRT segments whose weights exceed the
per-engine memory budget into pieces that fit, never cutting a unit (atomic subgraph or
multi-output group). Runs after any strategy."""

from __future__ import annotations

import math

from torch.fx import GraphModule, Node

from .result import TENSORRT, Segment
from .rules import attr_nbytes, weights_of
from .units import UnitGraph


def resource_partition(gm: GraphModule, segments: list[Segment], units: UnitGraph,
                       budget: int, notes: list[str]) -> list[Segment]:
    """Replace each TensorRT segment over ``budget`` bytes of weights by pieces under it.

    A segment's footprint is the bytes of the distinct weights (get_attr tensors) its nodes
    read; a weight used by two pieces counts in both (each engine holds a copy). Split:
    order the segment's units topologically (units contiguous), aim for
    ceil(footprint / budget) pieces of equal weight and cut where the running weight passes
    each share. A cut that falls inside a unit moves to the unit's edge so the whole unit
    goes to the side holding most of its nodes. Pieces still over the budget are split
    again; a single unit over the budget cannot be split: it stays whole and is reported
    in ``notes``. O(n log(footprint / budget)) per segment of n nodes."""
    sizes: dict[str, int] = {}
    out: list[Segment] = []
    for seg in segments:
        if seg.target != TENSORRT or _footprint(gm, seg.nodes, sizes) <= budget:
            out.append(seg)
            continue
        seq = sorted({units.unit_of[n] for n in seg.nodes})  # unit indices: topological
        for piece in _split(gm, [units.nodes[u] for u in seq], budget, sizes, notes):
            nodes = [n for unit in piece for n in unit]
            out.append(Segment(TENSORRT, nodes))
    return out


def _footprint(gm: GraphModule, nodes: list[Node], sizes: dict[str, int]) -> int:
    total = 0
    for name, attr in weights_of(nodes).items():
        if name not in sizes:
            sizes[name] = attr_nbytes(gm, attr)
        total += sizes[name]
    return total


def _split(gm: GraphModule, seq: list[list[Node]], budget: int, sizes: dict[str, int],
           notes: list[str]) -> list[list[list[Node]]]:
    """Pieces (lists of units) of ``seq``, each within ``budget`` unless a single unit."""
    flat = [n for unit in seq for n in unit]
    total = _footprint(gm, flat, sizes)
    if total <= budget:
        return [seq]
    if len(seq) == 1:
        names = ", ".join(n.name for n in seq[0])
        notes.append(f"atomic group [{names}] needs {total} bytes of weights, over the "
                     f"per-engine budget of {budget}; it cannot be split and stays one engine")
        return [seq]
    cuts = _cut_points(seq, total, math.ceil(total / budget), sizes)
    pieces = [seq[a:b] for a, b in zip([0, *cuts], [*cuts, len(seq)]) if b > a]
    return [p for piece in pieces for p in _split(gm, piece, budget, sizes, notes)]


def _cut_points(seq: list[list[Node]], total: int, k: int, sizes: dict[str, int]) -> list[int]:
    """Unit indices where pieces start: one cut per share of ``total / k`` bytes."""
    cuts: list[int] = []
    seen: set[str] = set()
    running, share = 0, 1
    for u, unit in enumerate(seq):
        for pos, node in enumerate(unit):
            for arg in node.all_input_nodes:
                if arg.op == "get_attr" and arg.target not in seen:
                    seen.add(arg.target)
                    running += sizes[arg.target]
            if share < k and running > total * share / k:
                before, after = pos, len(unit) - pos  # node ``pos`` opens the next piece
                cut = u + 1 if before > after else u
                if 0 < cut < len(seq) and (not cuts or cut > cuts[-1]):
                    cuts.append(cut)
                while share < k and running > total * share / k:
                    share += 1
    if not cuts:  # every share ended inside the first or last unit: cut next to it
        cuts.append(1 if len(seq[0]) and _heavy_first(seq, sizes) else len(seq) - 1)
    return cuts


def _heavy_first(seq: list[list[Node]], sizes: dict[str, int]) -> bool:
    first = sum(sizes.get(a.target, 0) for a in weights_of(seq[0]).values())
    last = sum(sizes.get(a.target, 0) for a in weights_of(seq[-1]).values())
    return first >= last
