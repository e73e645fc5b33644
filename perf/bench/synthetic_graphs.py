"""Synthetic FX graphs for the partitioning benchmarks: elementwise ops with locality, an
unsupported op (lgamma), weights and multi-output nodes, every node with a fake-tensor
meta['val']; built directly with torch.fx, no export."""

from __future__ import annotations

import operator
import random

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx import Graph, GraphModule

aten = torch.ops.aten


def synthetic_graph(n_nodes: int, seed: int = 0) -> GraphModule:
    """About ``n_nodes`` call_function nodes: 25% add, 25% mul, 15% relu, 15% lgamma (no
    converter), 10% mul by a weight, 10% split with two getitems. Operands are mostly
    recent values (exponential distance), like real models."""
    rnd = random.Random(seed)
    with FakeTensorMode():
        full, half = torch.empty(2, 4), torch.empty(1, 4)
    root, graph = torch.nn.Module(), Graph()
    values = []
    for i in range(2):
        node = graph.placeholder(f"x{i}")
        node.meta["val"] = full
        values.append(node)

    def operand():
        return values[-1 - min(int(rnd.expovariate(0.3)), len(values) - 1)]

    def call(target, args, val):
        node = graph.call_function(target, args)
        node.meta["val"] = val
        return node

    count = 0
    while count < n_nodes:
        r = rnd.random()
        if r < 0.25:
            values.append(call(aten.add.Tensor, (operand(), operand()), full))
        elif r < 0.5:
            values.append(call(aten.mul.Tensor, (operand(), operand()), full))
        elif r < 0.65:
            values.append(call(aten.relu.default, (operand(),), full))
        elif r < 0.8:
            values.append(call(aten.lgamma.default, (operand(),), full))
        elif r < 0.9:
            name = f"w{count}"
            root.register_buffer(name, torch.ones(4))
            weight = graph.get_attr(name)
            weight.meta["val"] = root.get_buffer(name)
            values.append(call(aten.mul.Tensor, (operand(), weight), full))
        else:
            parts = call(aten.split.Tensor, (operand(), 1, 0), [half, half])
            values += [call(operator.getitem, (parts, j), half) for j in range(2)]
            count += 2
        count += 1
    graph.output(tuple(v for v in values[2:] if not v.users))
    return GraphModule(root, graph)
