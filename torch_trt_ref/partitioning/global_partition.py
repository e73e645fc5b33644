"""Global partitioning: the fewest TensorRT engines, then the fewest PyTorch <-> TensorRT
transitions, then the most nodes in TensorRT, never running in PyTorch a node the default
(fast) plan runs in TensorRT; exact by a search over the graph's downsets within a state
budget (docs/partitioning.md)."""

from __future__ import annotations

from .capability import is_compute_node
from .dependency_aware import dependency_aware_segments
from .fast import alternate, fast_start, greedy_phases, linear_segments, phase_units
from .result import TENSORRT, TORCH, Segment
from .rules import after_min_block_size, apply_min_block_size, merge_adjacent
from .units import UnitGraph

# Search states (downset, open target, open engine size) the exact search may create before
# it gives up; 1-3 s of CPU on the (loaded) development machine.
STATE_BUDGET = 100_000

Objective = tuple[int, int, int]  # (engines, transitions, -compute nodes in TensorRT)


def objective(segments: list[Segment]) -> Objective:
    """The global objective of a final plan (after min_block_size and merging), smaller is
    better: fewest TensorRT segments (engines), then fewest target changes between
    consecutive segments, then most compute nodes in TensorRT."""
    trt = [s for s in segments if s.target == TENSORRT]
    changes = sum(a.target != b.target for a, b in zip(segments, segments[1:]))
    return (len(trt), changes, -sum(is_compute_node(n) for s in trt for n in s.nodes))


def global_segments(units: UnitGraph, min_block_size: int = 1,
                    budget: int = STATE_BUDGET) -> list[Segment]:
    """The best plan under ``objective`` over every plan that honours the constraints.

    A plan assigns every unit a target -- PyTorch for units that cannot run in TensorRT,
    either for the others -- and orders the units topologically; its segments are the runs
    of one target in that order (so the segments form a DAG and run in order). Constraints:
    every TensorRT segment has >= ``min_block_size`` compute nodes, and every unit that
    the default plan (fast, after min_block_size) runs in TensorRT runs in TensorRT (the
    *floor*). Objective, in order: fewest engines; fewest transitions; most compute nodes
    in TensorRT. Without the floor, "fewest engines" is won by cutting convertible regions
    into pieces below min_block_size that then run in PyTorch (everything in PyTorch: 0
    engines); with "most nodes in TensorRT" first instead, one more node in TensorRT buys
    an extra engine and two transitions (measured on BERT with add forced to PyTorch).
    With min_block_size=1 the floor is every convertible unit.

    1. O(N + E): if the floor is every convertible unit and the greedy phases with the
       fewest engines meet min_block_size, they are optimal (``_greedy_optimum``; always
       the case at min_block_size=1).
    2. Otherwise an exact search (``_exact_plan``): dynamic programming over states (placed
       units, a downset of the unit DAG; target of the open segment; its compute nodes,
       capped at min_block_size). A step places one ready unit on a target; a TensorRT
       segment may be closed only at >= min_block_size. A step's cost depends only on the
       state, so the best cost per state is exact (every plan is a path, every path a
       plan). Branch and bound: the best of the fast, dependency-aware, other-start and
       linear plans that respect the floor is the incumbent, and a state is dropped when
       a lower bound of its final cost is no better: engines so far plus the most blocks
       of TensorRT-only units separated by PyTorch-only ones along a path ahead
       (``_engines_ahead``); transitions so far plus the most changes between units of one
       possible target along a path ahead (``_changes_ahead``); every convertible unit
       not yet placed counted as covered. States number at most downsets x 2 x
       (min_block_size + 1): linear in a chain, exponential in the graph's width.
    3. Past ``budget`` states the incumbent is returned unproven.

    ``units.optimal`` (-> ``PartitionResult.optimal``) is True after 1 or a finished 2,
    False after 3, and a note in the partition result names the case. Either way the
    result is never worse under ``objective`` than fast or dependency_aware, and so never
    has more engines.

    Complexity: O(N + E) in case 1; O(S x (R + d)) for S states, R ready units and d users
    per unit otherwise, S <= ``budget``."""
    m = max(min_block_size, 1)
    floor = _floor(units, m)
    greedy = _greedy_optimum(units, m, floor)
    if greedy is not None:
        return _report(units, greedy, True, f"optimal by greedy phases (min_block_size={m})")
    known = _best_known(units, m, floor)
    plan = _exact_plan(units, m, floor, budget, _scored(known, m))
    if plan is None:
        return _report(units, known, False, f"exact search stopped at {budget} states; best of "
                                            "fast, dependency-aware and linear plans")
    if plan == "incumbent":
        return _report(units, known, True, f"exact search (min_block_size={m}): no plan beats "
                                           "the best of fast, dependency-aware and linear")
    for target, members in plan:
        for u in members:
            if target == TORCH and units.targets[u] == TENSORRT:
                for node in units.nodes[u]:
                    units.reasons.setdefault(node, (
                        "global: the plan with the fewest engines runs it in PyTorch (its "
                        f"part of the default plan has < min_block_size={m} compute nodes)"))
    segments = [units.segment(target, members) for target, members in plan]
    return _report(units, segments, True, f"exact search (min_block_size={m})")


def _report(units: UnitGraph, segments: list[Segment], optimal: bool,
            how: str) -> list[Segment]:
    units.optimal = optimal
    units.notes.append(f"global: {how}")
    return segments


def _floor(units: UnitGraph, m: int) -> set[int]:
    """Units the default (fast) plan runs in TensorRT: its TensorRT phases that have
    >= m compute nodes."""
    floor: set[int] = set()
    for target, phase in phase_units(units, alternate(fast_start(units))):
        size = sum(is_compute_node(n) for u in phase for n in units.nodes[u])
        if target == TENSORRT and size >= m:
            floor.update(phase)
    return floor


def _trt_units(units: UnitGraph, segments: list[Segment], m: int) -> set[int]:
    kept = merge_adjacent(apply_min_block_size(
        [Segment(s.target, list(s.nodes), s.do_not_merge) for s in segments], m))
    return {units.unit_of[n] for s in kept if s.target == TENSORRT for n in s.nodes}


def _greedy_optimum(units: UnitGraph, m: int, floor: set[int]) -> list[Segment] | None:
    """The plan of greedy phases with the fewest engines, then phases, over both starts,
    when the floor is every convertible unit and each of its TensorRT phases has >= m
    compute nodes; else None.

    Greedy phases started from target c have the fewest phases among plans starting with
    c (after k phases they have placed a superset of what any such plan has placed after
    k segments, by induction over k), and with two alternating targets the engines grow
    with the phases. So this plan has the fewest engines, then transitions, among plans
    with every convertible unit in TensorRT and no size limit; when the floor forces every
    convertible unit into TensorRT and the plan meets min_block_size, it is optimal."""
    if len(floor) != sum(t == TENSORRT for t in units.targets):
        return None
    plans = [greedy_phases(units, alternate(first)) for first in (TENSORRT, TORCH)]
    best = min(plans, key=lambda p: (sum(s.target == TENSORRT for s in p), len(p)))
    if len(_trt_units(units, best, m)) != len(floor):
        return None
    return best


def _best_known(units: UnitGraph, m: int, floor: set[int]) -> list[Segment]:
    """The best plan, by ``objective``, among the strategies' plans that respect the floor
    (fast's and dependency-aware's always do)."""
    candidates = [greedy_phases(units, alternate(fast_start(units))),
                  dependency_aware_segments(units, m),
                  greedy_phases(units, alternate(TENSORRT)),
                  greedy_phases(units, alternate(TORCH)), linear_segments(units)]
    valid = [c for c in candidates if floor <= _trt_units(units, c, m)]
    return min(valid, key=lambda plan: _scored(plan, m))


def _scored(segments: list[Segment], m: int) -> Objective:
    """The objective of a strategy's plan after min_block_size and merging."""
    return objective(after_min_block_size(segments, m))


def _exact_plan(units: UnitGraph, m: int, floor: set[int], budget: int,
                incumbent: Objective):
    """(target, units) per segment of an optimal plan; None past ``budget`` states;
    "incumbent" when no plan is better than ``incumbent``."""
    n = len(units)
    weight = [sum(map(is_compute_node, units.nodes[u])) for u in range(n)]
    choices = [(TENSORRT,) if u in floor else (TENSORRT, TORCH)
               if units.targets[u] == TENSORRT else (TORCH,) for u in range(n)]
    deps_mask = [sum(1 << d for d in ds) for ds in units.deps]
    ready_of = {0: tuple(u for u in range(n) if not units.deps[u])}
    convertible = [weight[u] if units.targets[u] == TENSORRT else 0 for u in range(n)]
    left_of = {0: sum(convertible)}  # convertible compute nodes not yet placed
    blocks, turns = _engines_ahead(units, choices), _changes_ahead(units, choices)
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
                    left_of[after] = left_of[placed] - convertible[u]
                for target in choices[u]:
                    step = _step(cost, open_target, size, target, weight[u], m)
                    if step is None:
                        continue
                    new_cost, new_size = step
                    side = target != TENSORRT
                    ready = ready_of[after]
                    if (new_cost[0] + max((blocks[side][r] for r in ready), default=0),
                            new_cost[1] + max((turns[side][r] for r in ready), default=0),
                            new_cost[2] - left_of[after]) >= incumbent:
                        continue  # bound: cannot beat the incumbent
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
    if not final or min(final)[0] >= incumbent:
        return "incumbent"
    return _runs(layers, min(final)[1])


def _engines_ahead(units: UnitGraph, choices) -> tuple[list[int], list[int]]:
    """Lower bounds on the engines a unit and its descendants still need: per unit, the
    most blocks of TensorRT-only units along one path from it, where a PyTorch-only unit
    between two of them starts a new block (the two cannot share an engine: the PyTorch
    unit's segment lies between theirs). Index [0]: the path continues an open TensorRT
    segment (its first block may join it); [1]: it does not. O(N + E)."""
    n = len(units)
    joined, fresh = [0] * n, [0] * n
    for u in reversed(range(n)):
        after_joined = max((joined[v] for v in units.users[u]), default=0)
        after_fresh = max((fresh[v] for v in units.users[u]), default=0)
        if choices[u] == (TENSORRT,):
            joined[u], fresh[u] = after_joined, 1 + after_joined
        elif choices[u] == (TORCH,):
            joined[u] = fresh[u] = after_fresh
        else:
            joined[u], fresh[u] = after_joined, after_fresh
    return joined, fresh


def _changes_ahead(units: UnitGraph, choices) -> tuple[list[int], list[int]]:
    """Lower bounds on the transitions still ahead: per unit, the most target changes
    along one path from it among units with one possible target, starting from an open
    TensorRT segment ([0]) or an open PyTorch one ([1]). O(N + E)."""
    n = len(units)
    from_trt, from_torch = [0] * n, [0] * n
    for u in reversed(range(n)):
        then_trt = max((from_trt[v] for v in units.users[u]), default=0)
        then_torch = max((from_torch[v] for v in units.users[u]), default=0)
        if choices[u] == (TENSORRT,):
            from_trt[u], from_torch[u] = then_trt, 1 + then_trt
        elif choices[u] == (TORCH,):
            from_trt[u], from_torch[u] = 1 + then_torch, then_torch
        else:
            from_trt[u], from_torch[u] = then_trt, then_torch
    return from_trt, from_torch


def _moves(ready: tuple[int, ...], open_target: str | None, choices) -> tuple[int, ...]:
    """The units worth placing next. While a PyTorch segment is open and a unit that can
    only run in PyTorch is ready, placing that unit now is never worse than any later
    position (moving it earlier into the open segment leaves every segment's TensorRT
    nodes as they were, and where it leaves a PyTorch segment empty the TensorRT
    segments around it merge): so only the first such unit is tried."""
    if open_target == TORCH:
        for u in ready:
            if choices[u] == (TORCH,):
                return (u,)
    return ready


def _step(cost: Objective, open_target: str | None, size: int, target: str, weight: int,
          m: int):
    """Cost and open-segment size after placing a unit of ``weight`` on ``target``; None
    when that would close a TensorRT segment below min_block_size."""
    engines, changes, coverage = cost
    if target == TENSORRT:
        coverage -= weight
    if target == open_target:
        return (engines, changes, coverage), min(size + weight, m) if target == TENSORRT else 0
    if open_target == TENSORRT and size < m:
        return None
    engines += target == TENSORRT
    changes += open_target is not None
    return (engines, changes, coverage), min(weight, m) if target == TENSORRT else 0


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
