"""Random FX DAGs for the property tests: supported and unsupported ops, multi-output nodes
(split, max.dim) with getitems, shared inputs, weights (get_attr); built directly with
torch.fx so no export is needed. Every node carries meta['val'] (the real value)."""

from __future__ import annotations

import operator

import torch
from hypothesis import strategies as st
from torch.fx import Graph, GraphModule

aten = torch.ops.aten

# kind -> (target, number of tensor operands). Supported by tests' registry: add, mul, sub,
# relu, split; unsupported: lgamma, erf, atan2, max.dim.
OPS = {
    "add": (aten.add.Tensor, 2), "mul": (aten.mul.Tensor, 2), "sub": (aten.sub.Tensor, 2),
    "relu": (aten.relu.default, 1), "lgamma": (aten.lgamma.default, 1),
    "erf": (aten.erf.default, 1), "atan2": (aten.atan2.default, 2),
    "split": (aten.split.Tensor, 1), "max": (aten.max.dim, 1), "weight": (aten.mul.Tensor, 1),
}
KINDS = sorted(OPS)


def build(ops: list[tuple[str, tuple[int, ...], int]], n_inputs: int = 2,
          seed: int = 0) -> tuple[GraphModule, tuple[torch.Tensor, ...]]:
    """``ops``: (kind, operand picks, weight rows). Operand picks index the values made so
    far (modulo their count), so every draw is a valid DAG. Returns the module and inputs
    of shape (2, 4); values have shape (2, 4) or (1, 4) and broadcast together."""
    gen = torch.Generator().manual_seed(seed)
    inputs = tuple(torch.rand(2, 4, generator=gen) + 0.5 for _ in range(n_inputs))
    root, graph = torch.nn.Module(), Graph()
    values, extra = [], []
    for i, x in enumerate(inputs):
        node = graph.placeholder(f"x{i}")
        node.meta["val"] = x
        values.append(node)

    def call(target, args):
        node = graph.call_function(target, args)
        real = tuple(a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args)
        node.meta["val"] = target(*real)
        return node

    for k, (kind, picks, rows) in enumerate(ops):
        target, arity = OPS[kind]
        args = [values[p % len(values)] for p in picks[:arity]]
        if kind == "weight":
            name = f"w{k}"
            root.register_buffer(name, torch.rand(rows, 4, generator=gen) + 0.5)
            weight = graph.get_attr(name)
            weight.meta["val"] = getattr(root, name)
            values.append(call(target, (args[0], weight)))
        elif kind == "split":
            parts = call(target, (args[0], 1, 0))
            values += [call(operator.getitem, (parts, j)) for j in range(len(parts.meta["val"]))]
        elif kind == "max":
            both = call(target, (args[0], 0, True))
            values.append(call(operator.getitem, (both, 0)))
            if picks[-1] % 2:  # sometimes the int64 indices are returned too
                extra.append(call(operator.getitem, (both, 1)))
        else:
            values.append(call(target, tuple(args)))
    sinks = [v for v in values[n_inputs:] if not v.users] or values[-1:]
    graph.output(tuple(sinks + extra))
    return GraphModule(root, graph), inputs


op_lists = st.lists(
    st.tuples(st.sampled_from(KINDS), st.tuples(st.integers(0, 30), st.integers(0, 30)),
              st.integers(1, 2)),
    min_size=1, max_size=14)
