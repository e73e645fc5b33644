"""Atomic subgraphs (seed 002): operator patterns TensorRT fuses into one kernel, which no
partition boundary may cut. A registry of patterns plus an anchored matcher on ATen graphs."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.fx import Graph, GraphModule, Node, symbolic_trace

from ..settings import op_name

aten = torch.ops.aten

# Binary ops whose first two operands may be swapped when matching a pattern.
COMMUTATIVE = {aten.add.Tensor, aten.mul.Tensor}


@dataclass(frozen=True)
class AtomicPattern:
    """A traced pattern graph; ``anchor`` is the node that produces the pattern's output."""

    name: str
    graph: Graph
    anchor: Node


ATOMIC_PATTERNS: list[AtomicPattern] = []


def register_atomic_subgraph(init_args: tuple = (), is_core_aten: bool = True,
                             patterns: list[AtomicPattern] | None = None) -> Callable:
    """Class decorator: register ``cls(*init_args)`` as an atomic subgraph.

    ``forward`` must call ATen overloads directly (``torch.ops.aten.relu.default(...)``);
    it is traced with ``torch.fx.symbolic_trace``. Its arguments are free inputs (they
    match any node or constant, and literal arguments such as strides are ignored), it
    must return one value, and every op it calls must be matched for the pattern to match.
    ``is_core_aten=False`` (patterns written with torch-level ops) is not supported: write
    the pattern with the ATen ops the lowered graph contains. ``patterns`` selects the list
    to register into (tests pass their own)."""
    if not is_core_aten:
        raise NotImplementedError("atomic patterns must be written with ATen overloads "
                                  "(is_core_aten=True); see docs/partitioning.md")

    def wrap(cls):
        module = cls(*init_args)
        (ATOMIC_PATTERNS if patterns is None else patterns).append(
            pattern_from_module(module, name=_pattern_name(cls, init_args)))
        return cls

    return wrap


def _pattern_name(cls: type, init_args: tuple) -> str:
    args = ", ".join(op_name(a) if isinstance(a, torch._ops.OpOverload) else repr(a)
                     for a in init_args)
    return f"{cls.__name__}({args})" if init_args else cls.__name__


def pattern_from_module(module: torch.nn.Module, name: str | None = None) -> AtomicPattern:
    graph = symbolic_trace(module).graph
    output = next(n for n in graph.nodes if n.op == "output")
    anchor = output.args[0]
    if not isinstance(anchor, Node) or anchor.op != "call_function":
        raise ValueError(f"atomic pattern {name or type(module).__name__} must return the "
                         "result of one ATen op")
    return AtomicPattern(name or type(module).__name__, graph, anchor)


def _node_args(node: Node) -> list[tuple[Any, Any]]:
    """(key, value) of a node's arguments: positions then keyword names."""
    return list(enumerate(node.args)) + list(node.kwargs.items())


def _match(p: Node, g: Any, found: dict[Node, Any]) -> bool:
    """Does pattern node ``p`` match graph value ``g``? Fills ``found`` (pattern -> graph)."""
    if p.op == "placeholder":  # a free input matches anything, consistently
        if p in found:
            return found[p] is g
        found[p] = g
        return True
    if not isinstance(g, Node) or g.op != "call_function" or g.target != p.target:
        return False
    if p in found:
        return found[p] is g
    found[p] = g
    g_args = dict(_node_args(g))
    for p_args in _orders(p):
        trial = dict(found)
        if all(_match(pa, g_args.get(k), trial) for k, pa in p_args if isinstance(pa, Node)):
            found.update(trial)
            return True
    del found[p]
    return False


def _orders(p: Node) -> list[list[tuple[Any, Any]]]:
    """The orders in which pattern node ``p``'s arguments may meet a graph node's: as
    written, and swapped for a commutative op."""
    orders = [_node_args(p)]
    if p.target in COMMUTATIVE and len(p.args) >= 2:
        swapped = (p.args[1], p.args[0], *p.args[2:])
        orders.append(list(enumerate(swapped)) + list(p.kwargs.items()))
    return orders


def _anchor_matches(anchor: Node, candidate: Node) -> list[list[Node]]:
    """The graph nodes of each match of the pattern at ``candidate``, one per argument order
    of the anchor that matches (add(mul, mul) matches Mul -> Add twice, once per mul)."""
    g_args = dict(_node_args(candidate))
    out = []
    for p_args in _orders(anchor):
        found = {anchor: candidate}
        if all(_match(pa, g_args.get(k), found) for k, pa in p_args if isinstance(pa, Node)) \
                and _contained(found, anchor):
            nodes = [g for p, g in found.items() if p.op == "call_function"]
            if nodes not in out:
                out.append(nodes)
    return out


def _contained(found: dict[Node, Any], anchor: Node) -> bool:
    """Only the anchor's value may be used outside the match (otherwise the intermediate
    values must exist on their own and TensorRT cannot fuse them away)."""
    inner = {g for p, g in found.items() if p.op == "call_function"}
    return all(user in inner for g in inner if g is not found[anchor] for user in g.users)


def find_atomic_groups(gm: GraphModule | Graph, patterns: list[AtomicPattern] | None = None,
                       by_target: dict[Any, list[Node]] | None = None,
                       ) -> list[tuple[str, list[Node]]]:
    """Every match of every pattern as (pattern name, graph nodes). Matches of one pattern
    do not overlap (first match in graph order wins), except the matches at one anchor,
    which are one group: in add(mul(a, b), mul(c, d)) each mul fuses into the add, so
    neither may be cut from it. Matches of different patterns may overlap.

    Anchored matching: for each pattern, only graph nodes whose target equals the anchor's
    and whose arguments include the ops feeding the anchor are tried; the match then walks
    the pattern's arguments backwards. Cost: O(N) to index the graph plus O(candidates x
    pattern size). ``by_target`` (call_function nodes by target, in graph order) may be
    passed when the caller has it already."""
    if by_target is None:
        by_target = {}
        for node in (gm.graph if isinstance(gm, GraphModule) else gm).nodes:
            if node.op == "call_function":
                by_target.setdefault(node.target, []).append(node)
    groups = []
    for pattern in ATOMIC_PATTERNS if patterns is None else patterns:
        feeding = {a.target for a in pattern.anchor.all_input_nodes if a.op == "call_function"}
        taken: set[Node] = set()
        for candidate in by_target.get(pattern.anchor.target, ()):
            if not feeding <= {a.target for a in candidate.all_input_nodes}:
                continue
            group: list[Node] = []
            for nodes in _anchor_matches(pattern.anchor, candidate):
                new = [n for n in nodes if n not in group]
                if taken.isdisjoint(new):
                    taken.update(new)
                    group += new
            if group:
                groups.append((pattern.name, group))
    return groups


# ---------------------------------------------------------------------------------------
# Built-in patterns (seed 002): Conv -> BatchNorm -> act, Conv -> act, Mul -> Add, Mul -> Mul,
# where act is SiLU (also in its decomposed form x * sigmoid(x)), GELU, ReLU or Sigmoid.

ACTIVATIONS = (aten.silu.default, aten.gelu.default, aten.relu.default, aten.sigmoid.default)


class ConvBatchNormActivation(torch.nn.Module):
    def __init__(self, activation):
        super().__init__()
        self.activation = activation

    def forward(self, x, weight, bias, bn_weight, bn_bias, mean, var):
        y = aten.convolution.default(x, weight, bias, [1], [0], [1], False, [0], 1)
        y = aten._native_batch_norm_legit_no_training.default(y, bn_weight, bn_bias, mean,
                                                              var, 0.1, 1e-5)
        return self.activation(operator.getitem(y, 0))


class ConvActivation(torch.nn.Module):
    def __init__(self, activation):
        super().__init__()
        self.activation = activation

    def forward(self, x, weight, bias):
        return self.activation(aten.convolution.default(x, weight, bias, [1], [0], [1], False,
                                                        [0], 1))


class ConvBatchNormSiLUDecomposed(torch.nn.Module):
    """SiLU after lowering: core ATen decomposes silu(y) into mul(y, sigmoid(y))."""

    def forward(self, x, weight, bias, bn_weight, bn_bias, mean, var):
        y = aten.convolution.default(x, weight, bias, [1], [0], [1], False, [0], 1)
        y = aten._native_batch_norm_legit_no_training.default(y, bn_weight, bn_bias, mean,
                                                              var, 0.1, 1e-5)
        y = operator.getitem(y, 0)
        return aten.mul.Tensor(y, aten.sigmoid.default(y))


class ConvSiLUDecomposed(torch.nn.Module):
    def forward(self, x, weight, bias):
        y = aten.convolution.default(x, weight, bias, [1], [0], [1], False, [0], 1)
        return aten.mul.Tensor(y, aten.sigmoid.default(y))


class MulAdd(torch.nn.Module):
    def forward(self, a, b, c):
        return aten.add.Tensor(aten.mul.Tensor(a, b), c)


class MulMul(torch.nn.Module):
    def forward(self, a, b, c):
        return aten.mul.Tensor(aten.mul.Tensor(a, b), c)


for _act in ACTIVATIONS:
    register_atomic_subgraph(init_args=(_act,))(ConvBatchNormActivation)
for _act in ACTIVATIONS:
    register_atomic_subgraph(init_args=(_act,))(ConvActivation)
register_atomic_subgraph()(ConvBatchNormSiLUDecomposed)
register_atomic_subgraph()(ConvSiLUDecomposed)
register_atomic_subgraph()(MulAdd)
register_atomic_subgraph()(MulMul)
