"""Golden plans of small graphs for every strategy, derived by hand from each algorithm's
definition (so a torch upgrade or a refactor cannot silently change them), and a brute
force check that the global strategy finds the fewest segments."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import torch_trt_ref as ttr
from torch_trt_ref.partitioning import check_node, partition

from .graphs import build
from .support import make_registry, plan

REGISTRY = make_registry()
SETTINGS = ttr.CompilationSettings(min_block_size=1)
T, P = "tensorrt", "torch"

# Values are numbered x0=0, x1=1, then one per op (split adds one per getitem).
GRAPHS = {
    # a=relu(x0) b=lgamma(x1) c=relu(a) d=lgamma(b) e=add(c, d)
    "two_chains": [("relu", (0, 0), 1), ("lgamma", (1, 0), 1), ("relu", (2, 0), 1),
                   ("lgamma", (3, 0), 1), ("add", (4, 5), 1)],
    # g0, g1 = split(x0); l=lgamma(g0); m=add(g1, x0); o=add(l, m)
    "split_diamond": [("split", (0, 0), 1), ("lgamma", (2, 0), 1), ("add", (3, 0), 1),
                      ("add", (4, 5), 1)],
    # m=mul(x0, x1); l=lgamma(x0); a=add(m, l): mul->add is atomic, so it moves after l
    "atomic_after_torch": [("mul", (0, 1), 1), ("lgamma", (0, 0), 1), ("add", (2, 3), 1)],
}
GOLDEN = {
    "two_chains": {
        "linear": [(T, ["relu"]), (P, ["lgamma"]), (T, ["relu"]), (P, ["lgamma"]), (T, ["add"])],
        "fast": [(P, ["lgamma", "lgamma"]), (T, ["add", "relu", "relu"])],
        "dependency_aware": [(P, ["lgamma", "lgamma"]), (T, ["add", "relu", "relu"])],
        "global": [(P, ["lgamma", "lgamma"]), (T, ["add", "relu", "relu"])],
        "hierarchical": [(T, ["relu", "relu"]), (P, ["lgamma", "lgamma"]), (T, ["add"])],
    },
    "split_diamond": {
        "linear": [(T, ["split"]), (P, ["lgamma"]), (T, ["add", "add"])],
        "fast": [(T, ["add", "split"]), (P, ["lgamma"]), (T, ["add"])],
        # walked in fast's phase order (split, m | l | o): l finalizes {split, m}
        "dependency_aware": [(T, ["add", "split"]), (P, ["lgamma"]), (T, ["add"])],
        "global": [(T, ["add", "split"]), (P, ["lgamma"]), (T, ["add"])],
        "hierarchical": [(T, ["add", "split"]), (P, ["lgamma"]), (T, ["add"])],
    },
    "atomic_after_torch": {s: [(P, ["lgamma"]), (T, ["add", "mul"])] for s in
                           ("linear", "fast", "dependency_aware", "global", "hierarchical")},
}
CASES = [(g, s) for g in GOLDEN for s in GOLDEN[g]]


@pytest.mark.parametrize("graph,strategy", CASES, ids=[f"{g}-{s}" for g, s in CASES])
def test_golden_plan(graph, strategy):
    gm, _ = build(GRAPHS[graph])
    assert plan(partition(gm, SETTINGS, REGISTRY, strategy=strategy)) == GOLDEN[graph][strategy]


def _fewest_segments_by_brute_force(gm, supported) -> int:
    """Minimum, over every topological order of the call nodes, of the number of target
    changes + 1 (a plan's segments are runs of one target in some topological order)."""
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    deps = {n: {a for a in n.all_input_nodes if a in calls} for n in calls}
    best = len(calls)

    def walk(done, last, count):
        nonlocal best
        if count >= best:
            return
        if len(done) == len(calls):
            best = count
            return
        for n in calls:
            if n not in done and deps[n] <= done:
                target = n in supported
                walk(done | {n}, target, count + (target != last))

    walk(frozenset(), None, 0)
    return best


# Single-output ops only, and no mul: no fusion groups, so units are nodes.
plain_ops = st.lists(st.tuples(st.sampled_from(["add", "sub", "relu", "lgamma", "erf", "atan2"]),
                               st.tuples(st.integers(0, 30), st.integers(0, 30)),
                               st.just(1)), min_size=1, max_size=7)


@settings(max_examples=40, deadline=None)
@given(ops=plain_ops)
def test_global_has_the_fewest_segments_of_any_plan(ops):
    gm, _ = build(ops)
    result = partition(gm, SETTINGS, REGISTRY, strategy="global")
    supported = {n for n in gm.graph.nodes
                 if n.op == "call_function" and check_node(n, SETTINGS, REGISTRY) is None}
    assert len(result.segments) == _fewest_segments_by_brute_force(gm, supported)


def test_golden_graphs_have_the_intended_support():
    gm, _ = build(GRAPHS["two_chains"])
    ops = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert ops == ["aten.relu.default", "aten.lgamma.default", "aten.relu.default",
                   "aten.lgamma.default", "aten.add.Tensor"]
    assert torch.ops.aten.lgamma.default not in REGISTRY
