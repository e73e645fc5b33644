"""Units: fusion groups that would depend on each other both ways are merged, and a unit
is ordered after everything it reads even when its first node comes earlier."""

import torch_trt_ref as ttr
from torch_trt_ref.partitioning import partition
from torch_trt_ref.partitioning.driver import unit_graph

from .graphs import build
from .support import check_invariants, make_registry

SETTINGS = ttr.CompilationSettings(min_block_size=1)


def test_groups_on_a_cycle_become_one_unit():
    # a1 = relu(x0); b1 = relu(a1); b2 = relu(x1); a2 = relu(b2). Groups A = {a1, a2} and
    # B = {b1, b2}: A feeds B (a1 -> b1) and B feeds A (b2 -> a2), so neither can go first.
    gm, _ = build([("relu", (0, 0), 1), ("relu", (2, 0), 1), ("relu", (1, 0), 1),
                   ("relu", (4, 0), 1)])
    a1, b1, b2, a2 = [n for n in gm.graph.nodes if n.op == "call_function"]
    units = unit_graph(gm, SETTINGS, {}, atomic=[[a1, a2], [b1, b2]])
    assert units.nodes == [[a1, b1, b2, a2]]


def test_group_is_ordered_after_what_it_reads():
    # m = mul(x0, x1); l = lgamma(x0); a = add(m, l): the mul->add unit reads l.
    gm, _ = build([("mul", (0, 1), 1), ("lgamma", (0, 0), 1), ("add", (2, 3), 1)])
    m, lg, a = [n for n in gm.graph.nodes if n.op == "call_function"]
    units = unit_graph(gm, SETTINGS, {lg: "no converter"})
    assert units.nodes == [[lg], [m, a]] and units.deps == [[], [0]]
    check_invariants(gm, partition(gm, SETTINGS, make_registry()), SETTINGS)
