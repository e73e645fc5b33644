"""Each strategy keeps its promise (docs/partitioning.md), on random DAGs of <= 12 ops:
global equals a brute-force optimum of its objective and is never beaten by another
strategy; dependency_aware never has more segments than fast, and holds every fast engine
inside one of its own."""

from functools import lru_cache

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import torch_trt_ref as ttr
from torch_trt_ref.partitioning import check_node, partition
from torch_trt_ref.partitioning.capability import is_compute_node
from torch_trt_ref.partitioning.driver import unit_graph
from torch_trt_ref.partitioning.global_partition import _exact_plan, objective

from .graphs import KINDS
from .graphs import build as build_graph
from .support import make_registry

REGISTRY = make_registry()
T, P = "tensorrt", "torch"
OTHERS = ("fast", "dependency_aware", "hierarchical", "linear")
SLOW = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # default count

small_graphs = st.lists(
    st.tuples(st.sampled_from(KINDS), st.tuples(st.integers(0, 30), st.integers(0, 30)),
              st.integers(1, 2)),
    min_size=1, max_size=12)
knobs = st.fixed_dictionaries({
    "min_block_size": st.integers(1, 4),
    "torch_executed_ops": st.sampled_from([(), ("aten.add.Tensor",), ("aten.mul.Tensor",),
                                           ("aten.relu.default",)]),
})


def brute_force(units, min_block_size: int, floor: set[int]):
    """The best objective over every plan, by exhaustion: every topological order of the
    units and every choice of TensorRT or PyTorch for each convertible unit outside the
    floor (units in it run in TensorRT, the unconvertible ones in PyTorch); segments are
    the runs of one target in the order, so they form a DAG; a plan with a TensorRT
    segment of < min_block_size compute nodes is invalid. Objective: (engines,
    transitions, -compute nodes in TensorRT). Written as a memoized recursion over (units
    placed, open segment's target, its size) so that orders sharing a prefix set share
    their work."""
    n, m = len(units), min_block_size
    weight = [sum(map(is_compute_node, nodes)) for nodes in units.nodes]
    deps = [frozenset(d) for d in units.deps]

    def targets(u):
        if u in floor:
            return (T,)
        return (T, P) if units.targets[u] == T else (P,)

    @lru_cache(maxsize=None)
    def best(placed: frozenset, open_target, size):
        if len(placed) == n:
            return None if open_target == T and size < m else (0, 0, 0)
        found = []
        for u in set(range(n)) - placed:
            if not deps[u] <= placed:
                continue
            for target in targets(u):
                if target != open_target and open_target == T and size < m:
                    continue  # would close a TensorRT segment below min_block_size
                new = target != open_target
                grown = (0 if new else size) + weight[u] if target == T else 0
                rest = best(placed | {u}, target, min(grown, m))
                if rest is not None:
                    found.append((rest[0] + (new and target == T),
                                  rest[1] + (new and open_target is not None),
                                  rest[2] - (weight[u] if target == T else 0)))
        return min(found, default=None)

    return best(frozenset(), None, 0)


def default_floor(units, result):
    """The units the default plan (fast's result) runs in TensorRT."""
    return {units.unit_of[n] for s in result.segments if s.target == T for n in s.nodes}


def _setup(ops, knob):
    gm, _ = build_graph(ops)
    s = ttr.CompilationSettings(**knob)
    return gm, s


def _units(gm, s):
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    rejected = {n: r for n in calls if (r := check_node(n, s, REGISTRY)) is not None}
    return unit_graph(gm, s, rejected)


def _no_boundary_redo(gm, s, result):
    """The driver rejects a node passing a non-tensor across a TensorRT boundary and plans
    again; the brute force sees the first unit graph, so such draws are skipped."""
    return not any("non-tensor" in why for why in result.rejected.values())


def _engines(result):
    return [s for s in result.segments if s.target == T]


@SLOW
@given(ops=small_graphs, knob=knobs)
def test_global_equals_brute_force_optimum(ops, knob):
    gm, s = _setup(ops, knob)
    result = partition(gm, s, REGISTRY, strategy="global")
    fast = partition(gm, s, REGISTRY, strategy="fast")
    assume(_no_boundary_redo(gm, s, result))
    units = _units(gm, s)
    assert len(units) <= 12
    assert result.optimal is True
    optimum = brute_force(units, s.min_block_size, default_floor(units, fast))
    assert objective(result.segments) == optimum
    assert default_floor(units, fast) <= default_floor(units, result)


@SLOW
@given(ops=small_graphs, knob=knobs)
def test_exact_search_alone_equals_brute_force_optimum(ops, knob):
    """The search with other incumbents than the strategies' plans (on most small graphs
    the best of them is already optimal, so global's result alone would not show a wrong
    search): one no plan is worse than, and one just worse than the optimum, which
    bounds that overestimate would prune below. Both times the search must find the
    optimum itself."""
    gm, s = _setup(ops, knob)
    fast = partition(gm, s, REGISTRY, strategy="fast")
    assume(_no_boundary_redo(gm, s, fast))
    units = _units(gm, s)
    floor = default_floor(units, fast)
    optimum = brute_force(units, s.min_block_size, floor)
    n = len(units)
    for incumbent in ((n + 1, 2 * n + 1, 1), (*optimum[:2], optimum[2] + 1)):
        plan = _exact_plan(units, s.min_block_size, floor, 10**6, incumbent)
        assert plan not in (None, "incumbent"), (incumbent, optimum)
        segments = [units.segment(target, members) for target, members in plan]
        for seg in segments:
            if seg.target == T:
                assert sum(map(is_compute_node, seg.nodes)) >= s.min_block_size
        assert objective(segments) == optimum


@SLOW
@given(ops=small_graphs, knob=knobs)
def test_global_is_never_beaten(ops, knob):
    """global's objective (engines first) <= fast's and dependency_aware's; with
    min_block_size=1 (every convertible node in TensorRT in every plan) <= every
    strategy's."""
    gm, s = _setup(ops, knob)
    best = objective(partition(gm, s, REGISTRY, strategy="global").segments)
    others = OTHERS if s.min_block_size == 1 else ("fast", "dependency_aware")
    for name in others:
        other = objective(partition(gm, s, REGISTRY, strategy=name).segments)
        assert best <= other, (name, best, other)
        assert best[0] <= other[0], (name, best, other)


@SLOW
@given(ops=small_graphs, knob=knobs)
def test_dependency_aware_never_more_than_fast(ops, knob):
    """Fewer or as many engines and segments, every node fast runs in TensorRT, and
    either every engine of fast (its node set) lies inside one engine of dependency_aware
    or dependency_aware has fewer engines or segments (the other start's walk won)."""
    gm, s = _setup(ops, knob)
    fast = partition(gm, s, REGISTRY, strategy="fast")
    dep = partition(gm, s, REGISTRY, strategy="dependency_aware")
    assert len(_engines(dep)) <= len(_engines(fast))
    assert len(dep.segments) <= len(fast.segments)
    in_trt = lambda r: {n for e in _engines(r) for n in e.nodes}  # noqa: E731
    assert in_trt(dep) >= in_trt(fast)
    fewer = (len(_engines(dep)), len(dep.segments)) != (len(_engines(fast)), len(fast.segments))
    if not fewer:
        for engine in _engines(fast):
            assert any(set(engine.nodes) <= set(e.nodes) for e in _engines(dep)), engine.nodes


def test_brute_force_sees_the_min_block_size_trade():
    """A hand-made check of the oracle itself: relu chain a -> b -> c, lgamma(x1) = p
    independent, min_block_size=3. fast: [P p] [T a b c]; best: that plan, (1 engine, 1
    transition, -3 nodes in TensorRT). At min_block_size=4 fast runs everything in
    PyTorch (empty floor) and so does the best plan: (0, 0, 0)."""
    ops = [("relu", (0, 0), 1), ("relu", (2, 0), 1), ("relu", (3, 0), 1),
           ("lgamma", (1, 0), 1)]
    gm, _ = build_graph(ops)
    for m, expected in ((3, (1, 1, -3)), (4, (0, 0, 0))):
        s = ttr.CompilationSettings(min_block_size=m)
        units = _units(gm, s)
        floor = default_floor(units, partition(gm, s, REGISTRY, strategy="fast"))
        assert brute_force(units, m, floor) == expected
        assert objective(partition(gm, s, REGISTRY, strategy="global").segments) == expected
