"""Graph runs for the divergence finder: a float64 copy of a lowered graph, and an FX run
that records every node's value by node name."""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node

aten = torch.ops.aten
REDUCED = (torch.float32, torch.float16, torch.bfloat16)
# Ops whose dtype argument reinterprets bits (a float64 "view" would change the shape).
BITCASTS = {aten.view.dtype}


def flat_inputs(gm: GraphModule, args: tuple, kwargs: dict) -> list[Any]:
    """The placeholder values of ``gm`` for a call ``gm(*args, **kwargs)``."""
    info = getattr(gm.graph._codegen, "pytree_info", None)
    if info is None or info.in_spec is None:
        return [*args, *kwargs.values()]
    from torch.fx._pytree import tree_flatten_spec

    return list(tree_flatten_spec((tuple(args), dict(kwargs)), info.in_spec))


FLOATS = (*REDUCED, torch.float64)


def cast_value(value: Any, dtype: torch.dtype) -> Any:
    """A float tensor or float dtype in ``dtype``; anything else as it is."""
    if isinstance(value, torch.dtype) and value in FLOATS:
        return dtype
    if isinstance(value, torch.Tensor) and value.dtype in FLOATS and value.dtype != dtype:
        return value.detach().to(dtype)
    return value


def cast_graph(gm: GraphModule, dtype: torch.dtype = torch.float64) -> GraphModule:
    """A copy of ``gm`` computing in float64 (or ``dtype``): float weights are cast copies,
    and every explicit float dtype argument (``_to_copy(x, dtype=f32)``,
    ``full(..., dtype=f16)``) names float64 instead. Node names are kept, so values compare
    by name. Float inputs must be passed cast the same way (``cast_value``)."""

    def _f64(value):
        return cast_value(value, dtype)

    graph = Graph()
    env: dict[Node, Node] = {}
    root = torch.nn.Module()
    for node in gm.graph.nodes:
        new = graph.node_copy(node, lambda n: env[n])
        new.name = node.name
        if node.op == "get_attr":
            value = operator.attrgetter(node.target)(gm)
            name = node.target.replace(".", "__")
            new.target = name
            if isinstance(value, torch.Tensor):
                root.register_buffer(name, _f64(value))
            else:
                setattr(root, name, value)
        elif node.op == "call_function" and node.target not in BITCASTS:
            new.args = torch.fx.node.map_aggregate(new.args, _f64)
            new.kwargs = torch.fx.node.map_aggregate(new.kwargs, _f64)
        env[node] = new
    graph._codegen = gm.graph._codegen
    return GraphModule(root, graph)


class Recorder(torch.fx.Interpreter):
    """Runs a GraphModule node by node; ``values`` maps node name -> value. Call modules
    (segments of a stitched module) go through ``on_call_module`` when given."""

    def __init__(self, gm: GraphModule, values: dict[str, Any] | None = None,
                 on_call_module=None, clone: bool = False):
        super().__init__(gm)
        self.values = {} if values is None else values
        self.on_call_module = on_call_module
        self.clone = clone  # for graphs with in-place ops, which would edit recorded values

    def run_node(self, node: Node) -> Any:
        result = super().run_node(node)
        if node.op not in ("output", "get_attr"):
            self.values[node.name] = (result.clone() if self.clone and isinstance(
                result, torch.Tensor) else result)
        return result

    def call_module(self, target, args, kwargs):
        if self.on_call_module is not None:
            return self.on_call_module(target, self.fetch_attr(target), args)
        return super().call_module(target, args, kwargs)


def run_recording(gm: GraphModule, flat: list[Any], values: dict[str, Any] | None = None,
                  on_call_module=None, clone: bool = False) -> tuple[Any, dict[str, Any]]:
    """Run ``gm`` on its placeholder values ``flat``; returns (flat outputs, node values)."""
    recorder = Recorder(gm, values, on_call_module, clone)
    with torch.no_grad():
        out = recorder.run(*flat, enable_io_processing=False)
    return out, recorder.values
