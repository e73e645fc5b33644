"""Global partitioning: the plan with the most nodes in TensorRT, then the fewest TensorRT
engines, then the fewest PyTorch <-> TensorRT transitions, found exactly by a search over
the graph's downsets when it fits a state budget (docs/partitioning.md)."""

from __future__ import annotations

from .dependency_aware import dependency_aware_segments
from .fast import alternate, greedy_phases, linear_segments
from .result import TENSORRT, TORCH, Segment
from .rules import apply_min_block_size, merge_adjacent
from .units import UnitGraph

# Search states (downset, open target, open engine size) the exact search may create before
# it gives up; about 1 s of CPU on the development machine.
STATE_BUDGET = 100_000

Objective = tuple[int, int, int]  # (-compute nodes in TensorRT, engines, transitions)


def objective(segments: list[Segment]) -> Objective:
    """The global objective of a final plan (after min_block_size and merging), smaller is
    better: most compute nodes in TensorRT, then fewest TensorRT segments (engines), then
    fewest target changes between consecutive segments."""
    from .capability import is_compute_node

    trt = [s for s in segments if s.target == TENSORRT]
    changes = sum(a.target != b.target for a, b in zip(segments, segments[1:]))
    return (-sum(is_compute_node(n) for s in trt for n in s.nodes), len(trt), changes)


def global_segments(units: UnitGraph, min_block_size: int = 1,
                    budget: int = STATE_BUDGET) -> list[Segment]:
    """The best plan under ``objective``, over every plan that honours the constraints.

    A plan assigns every unit a target -- PyTorch for units that cannot run in TensorRT,
    either for the others -- and orders the units topologically; its segments are the
    runs of one target in that order (so the segments form a DAG and run in order), and
    every TensorRT segment must have >= ``min_block_size`` compute nodes. Objective, in
    this order: most compute nodes in TensorRT; fewest TensorRT engines; fewest
    transitions. Coverage comes first because min_block_size is the user's price of an
    engine: a segment that meets it is one the user asked for, and "fewest engines" alone
    is won by running everything in PyTorch (0 engines). With min_block_size=1 every
    convertible unit runs in TensorRT and the plan has the fewest engines of all.

    First, in O(N + E): when the greedy phases with the fewest engines meet min_block_size
    they are optimal (``_greedy_optimum``; always the case at min_block_size=1).

    Exact algorithm otherwise (``_exact_plan``): dynamic programming over states (placed units: a
    downset of the unit DAG; target of the open segment; its compute nodes, capped at
    min_block_size). A step places one ready unit on a target; a TensorRT segment may be
    closed only at >= min_block_size. The cost of a step depends only on the state, so
    the best cost per state is exact (every plan is a path, every path a plan). States
    number at most downsets x 2 x (min_block_size + 1): a chain of N units has N + 1
    downsets, W independent chains (N/W)^W -- exponential in the graph's width.

    When the search would create more than ``budget`` states the result is the best, by
    ``objective``, of the fast plans from both starts, the dependency-aware and linear
    plans (each after min_block_size and merging), and ``units.optimal`` says so
    (False; True when exact) with a note in the partition result. Either way the result
    is never worse under ``objective`` than fast or dependency_aware.

    Complexity: O(N + E) when the greedy phases are optimal; exact search O(S x (R + d))
    for S states, R ready units and d users per unit; fallback O(N + E)."""
    greedy = _greedy_optimum(units, min_block_size)
    if greedy is not None:
        units.optimal = True
        units.notes.append("global: optimal by greedy phases (every TensorRT phase meets "
                           f"min_block_size={min_block_size})")
        return greedy
    plan = _exact_plan(units, min_block_size, budget)
    if plan is not None:
        units.optimal = True
        units.notes.append(f"global: exact search (min_block_size={min_block_size})")
        for target, members in plan:
            for u in members:
                if target == TORCH and units.targets[u] == TENSORRT:
                    for node in units.nodes[u]:
                        units.reasons.setdefault(node, (
                            f"global: the best plan has no TensorRT segment of >= "
                            f"min_block_size={min_block_size} compute nodes for it"))
        return [units.segment(target, members) for target, members in plan]
    units.optimal = False
    units.notes.append(f"global: exact search over {budget} states, fell back to the best of "
                       f"the fast, dependency-aware and linear plans (not proven optimal)")
    return _best_known(units, min_block_size)


def _greedy_optimum(units: UnitGraph, min_block_size: int) -> list[Segment] | None:
    """The plan of greedy phases with the fewest engines, then phases, over both starts,
    when each of its TensorRT phases has >= min_block_size compute nodes; else None.

    Greedy phases started from target c have the fewest phases among plans starting with
    c (after k phases they have placed a superset of what any such plan has placed after
    k segments, by induction over k), and with two alternating targets the engines grow
    with the phases. So this plan has the fewest engines, then transitions, among plans
    with every convertible unit in TensorRT and no size limit; when it meets
    min_block_size it also has the most nodes in TensorRT (all convertible ones), so it is
    optimal. O(N + E)."""
    from .capability import is_compute_node

    plans = [greedy_phases(units, alternate(first)) for first in (TENSORRT, TORCH)]
    best = min(plans, key=lambda p: (sum(s.target == TENSORRT for s in p), len(p)))
    for seg in best:
        if seg.target == TENSORRT and sum(map(is_compute_node, seg.nodes)) < min_block_size:
            return None
    return best


def _best_known(units: UnitGraph, min_block_size: int) -> list[Segment]:
    candidates = [greedy_phases(units, alternate(TENSORRT)),
                  greedy_phases(units, alternate(TORCH)),
                  dependency_aware_segments(units), linear_segments(units)]

    def score(segments: list[Segment]) -> Objective:
        copies = [Segment(s.target, list(s.nodes), s.do_not_merge) for s in segments]
        return objective(merge_adjacent(apply_min_block_size(copies, min_block_size)))

    return min(candidates, key=score)


def _exact_plan(units: UnitGraph, min_block_size: int,
                budget: int) -> list[tuple[str, list[int]]] | None:
    """(target, units) per segment of an optimal plan, or None over ``budget`` states."""
    from .capability import is_compute_node

    n, m = len(units), max(min_block_size, 1)
    if n == 0:
        return []
    weight = [sum(map(is_compute_node, units.nodes[u])) for u in range(n)]
    choices = [(TENSORRT, TORCH) if t == TENSORRT else (TORCH,) for t in units.targets]
    deps_mask = [sum(1 << d for d in ds) for ds in units.deps]
    ready_of = {0: tuple(u for u in range(n) if not units.deps[u])}
    # state (placed, target, size) -> (cost, previous state, unit, target)
    layer = {(0, None, 0): ((0, 0, 0), None, -1, None)}
    layers, created = [layer], 1
    for _ in range(n):
        nxt: dict = {}
        for state, (cost, *_rest) in layer.items():
            placed, open_target, size = state
            for u in _moves(ready_of[placed], open_target, choices):
                after = placed | (1 << u)
                if after not in ready_of:
                    ready_of[after] = _ready_after(ready_of[placed], u, after, units, deps_mask)
                for target in choices[u]:
                    step = _step(cost, open_target, size, target, weight[u], m)
                    if step is None:
                        continue
                    new_cost, new_size = step
                    key = (after, target, new_size)
                    old = nxt.get(key)
                    if old is None:
                        created += 1
                        if created > budget:
                            return None
                    if old is None or new_cost < old[0]:
                        nxt[key] = (new_cost, state, u, target)
        layers.append(nxt)
        layer = nxt
    final = [(v[0], k) for k, v in layer.items() if k[1] != TENSORRT or k[2] >= m]
    return _runs(layers, min(final)[1])


def _moves(ready: tuple[int, ...], open_target: str | None, choices) -> tuple[int, ...]:
    """The units worth placing next. While a PyTorch segment is open and a unit that can
    only run in PyTorch is ready, placing that unit now is never worse than any later
    position (moving it earlier into the open segment leaves every segment's TensorRT
    nodes as they were, and where it leaves a PyTorch segment empty the TensorRT
    segments around it merge): so only the first such unit is tried."""
    if open_target == TORCH:
        for u in ready:
            if len(choices[u]) == 1:
                return (u,)
    return ready


def _step(cost, open_target, size, target, weight, m):
    """Cost and open-segment size after placing a unit of ``weight`` on ``target``; None
    when that would close a TensorRT segment below min_block_size."""
    coverage, engines, changes = cost
    if target == TENSORRT:
        coverage -= weight
    if target == open_target:
        return (coverage, engines, changes), min(size + weight, m) if target == TENSORRT else 0
    if open_target == TENSORRT and size < m:
        return None
    engines += target == TENSORRT
    changes += open_target is not None
    return (coverage, engines, changes), min(weight, m) if target == TENSORRT else 0


def _ready_after(ready: tuple[int, ...], u: int, after: int, units: UnitGraph,
                 deps_mask: list[int]) -> tuple[int, ...]:
    new = [v for v in units.users[u] if deps_mask[v] & ~after == 0]
    return tuple(sorted([r for r in ready if r != u] + new))


def _runs(layers: list[dict], state) -> list[tuple[str, list[int]]]:
    """Walk the parent links back from ``state``; group the placements into segments."""
    steps = []
    for layer in reversed(layers[1:]):
        _, previous, u, target = layer[state]
        steps.append((target, u))
        state = previous
    runs: list[tuple[str, list[int]]] = []
    for target, u in reversed(steps):
        if runs and runs[-1][0] == target:
            runs[-1][1].append(u)
        else:
            runs.append((target, [u]))
    return runs
