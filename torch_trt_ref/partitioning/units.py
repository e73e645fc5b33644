"""Units: the indivisible pieces every strategy places. A unit is one call_function node or a
fusion group (a node passing non-tensor values to its users, e.g. a multi-output node with
its getitems, or an atomic subgraph), so no strategy can cut a fusion."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import torch
from torch.fx import Node

from ..settings import op_name
from .result import TORCH, Segment

Accepts = Callable[[Node, str], bool]  # can this node run on this target?


def is_tensor_value(node: Node) -> bool:
    """Nodes without metadata count as tensors (graphs built by hand)."""
    val = node.meta.get("val", node.meta.get("example_value"))
    return val is None or isinstance(val, torch.Tensor)


def is_control_flow(node: Node) -> bool:
    """Higher-order ops (torch.cond, while_loop, map...) get do_not_merge segments."""
    return isinstance(node.target, torch._ops.HigherOrderOperator)


class _UnionFind:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        a, b = self.find(a), self.find(b)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


@dataclass
class UnitGraph:
    """Units in a topological order (index = position), with their target and edges."""

    nodes: list[list[Node]]  # per unit, in graph order
    targets: list[str]
    deps: list[list[int]]  # units each unit reads values from
    users: list[list[int]]
    control_flow: list[bool]
    reasons: dict[Node, str] = field(default_factory=dict)  # why a node lost its own target
    notes: list[str] = field(default_factory=list)  # a strategy's remarks for the result
    optimal: bool | None = None  # did the strategy prove its plan optimal?

    def __len__(self) -> int:
        return len(self.nodes)

    @cached_property
    def unit_of(self) -> dict[Node, int]:
        """The unit holding each node."""
        return {n: u for u, members in enumerate(self.nodes) for n in members}

    def segment(self, target: str, units: list[int], do_not_merge: bool = False) -> Segment:
        """A segment of ``units``, in unit order (a topological order close to the graph's)."""
        return Segment(target, [n for u in sorted(units) for n in self.nodes[u]], do_not_merge)


def build_units(node_target: dict[Node, str], accepts: Accepts, priority: tuple[str, ...],
                atomic: list[list[Node]] = ()) -> UnitGraph:
    """Group nodes into units and order the units topologically.

    Groups: a node and its users when the node's value is not a tensor; each atomic match.
    Groups that would form a cycle between them are merged (strongly connected components
    of the unit graph), which also pulls in any node lying on a path between two members.
    ``node_target`` is each call_function node's preferred target (keys in graph order); a
    unit whose members disagree gets the first target of ``priority`` that ``accepts``
    every member (torch accepts all). O(N + E); a heap orders the units only when the
    graph order of their first nodes is not already topological."""
    calls = list(node_target)
    index: dict[Node, int] = {}
    non_tensor = []
    for i, node in enumerate(calls):
        index[node] = i
        if not is_tensor_value(node):
            non_tensor.append(i)
    uf = _UnionFind(len(calls))
    grouped = False
    for i in non_tensor:
        for user in calls[i].users:
            j = index.get(user)
            if j is not None:
                uf.union(i, j)
                grouped = True
    for group in atomic:
        for member in group[1:]:
            uf.union(index[group[0]], index[member])
            grouped = True
    roots = [uf.find(i) for i in range(len(calls))] if grouped else list(range(len(calls)))
    units = _ordered(calls, index, roots, node_target, accepts, priority)
    if units is None:  # some groups depend on each other both ways: merge them
        roots = _merge_cycles(calls, index, roots)
        units = _ordered(calls, index, roots, node_target, accepts, priority)
    return units


def _group_target(group: list[Node], node_target: dict[Node, str], accepts: Accepts,
                  priority: tuple[str, ...], reasons: dict[Node, str]) -> str:
    wanted = {node_target[n] for n in group}
    if len(wanted) == 1:
        return wanted.pop()
    target = next((t for t in priority if all(accepts(n, t) for n in group)), TORCH)
    for n in group:
        if node_target[n] != target:
            blockers = sorted({op_name(m.target) for m in group
                               if not accepts(m, node_target[n])})
            reasons[n] = (f"in a fusion group with {', '.join(blockers)}, which cannot run "
                          f"on {node_target[n]}")
    return target


def _merge_cycles(calls: list[Node], index: dict[Node, int], roots: list[int]) -> list[int]:
    """Merge groups lying on a common cycle of the group graph (iterative Tarjan SCC)."""
    if len(set(roots)) == len(roots):
        return roots  # all singletons: the node graph is a DAG already
    succ: dict[int, set[int]] = {r: set() for r in roots}
    for i, node in enumerate(calls):
        for user in node.users:
            j = index.get(user)
            if j is not None and roots[j] != roots[i]:
                succ[roots[i]].add(roots[j])
    low, num, on_stack, stack, comp = {}, {}, set(), [], {}
    counter = 0
    for start in succ:
        if start in num:
            continue
        work = [(start, iter(succ[start]))]
        num[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == num[v]:
                    while True:
                        x = stack.pop()
                        on_stack.discard(x)
                        comp[x] = v
                        if x == v:
                            break
            elif w not in num:
                num[w] = low[w] = counter
                counter += 1
                stack.append(w)
                on_stack.add(w)
                work.append((w, iter(succ[w])))
            elif w in on_stack:
                low[v] = min(low[v], num[w])
    return [comp[r] for r in roots]


def _ordered(calls: list[Node], index: dict[Node, int], roots: list[int],
             node_target: dict[Node, str], accepts: Accepts,
             priority: tuple[str, ...]) -> UnitGraph | None:
    """Number groups by their first node, compute edges, and order them topologically
    (Kahn's algorithm, earliest first node first) when that numbering is not already.
    None when the groups form a cycle."""
    gid = [-1] * len(roots)
    group_of = []
    groups: list[list[Node]] = []
    for i, root in enumerate(roots):
        if gid[root] < 0:
            gid[root] = len(groups)
            groups.append([])
        group_of.append(gid[root])
        groups[gid[root]].append(calls[i])
    deps: list[list[int]] = []
    control_flow: list[bool] = []
    topological = True
    for g, members in enumerate(groups):
        ds = {group_of[j] for n in members for a in n.all_input_nodes
              if (j := index.get(a)) is not None}
        ds.discard(g)
        topological = topological and all(d < g for d in ds)
        deps.append(sorted(ds))
        control_flow.append(any(is_control_flow(n) for n in members))
    if not topological:
        ordered = _kahn(groups, deps, control_flow)
        if ordered is None:
            return None
        groups, deps, control_flow = ordered
    users: list[list[int]] = [[] for _ in groups]
    for g, ds in enumerate(deps):
        for d in ds:
            users[d].append(g)
    reasons: dict[Node, str] = {}
    targets = [node_target[m[0]] if len(m) == 1 else
               _group_target(m, node_target, accepts, priority, reasons) for m in groups]
    return UnitGraph(nodes=groups, targets=targets, deps=deps, users=users,
                     control_flow=control_flow, reasons=reasons)


def _kahn(groups: list[list[Node]], deps: list[list[int]], flags: list[bool]):
    """Topological order of groups (earliest first node first), or None on a cycle."""
    users: list[list[int]] = [[] for _ in groups]
    for g, ds in enumerate(deps):
        for d in ds:
            users[d].append(g)
    remaining = [len(d) for d in deps]
    heap = [g for g in range(len(groups)) if remaining[g] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        g = heapq.heappop(heap)
        order.append(g)
        for u in users[g]:
            remaining[u] -= 1
            if remaining[u] == 0:
                heapq.heappush(heap, u)
    if len(order) < len(groups):
        return None
    new = {g: i for i, g in enumerate(order)}
    return ([groups[g] for g in order], [sorted(new[d] for d in deps[g]) for g in order],
            [flags[g] for g in order])
