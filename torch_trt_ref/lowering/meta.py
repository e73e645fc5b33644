"""Node metadata (FakeTensor ``val``): its re-propagation after passes that change dtypes,
and the two graph edits the passes share: ``insert_call``, a new node whose metadata is
computed as it is inserted, and ``remove_dead_nodes``."""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node
from torch.fx.passes.fake_tensor_prop import FakeTensorProp


def propagate_meta(gm: GraphModule) -> GraphModule:
    """Recompute ``meta['val']`` of every node with the capture's fake mode, so symbolic
    shapes stay those of torch.export.

    Weights get a fake tensor of their shape, strides and dtype made directly (FakeTensorProp
    converts each real weight, ~1 ms apiece: a third of the pass on BERT-base); the rest run
    on fake values node by node. A graph this cannot run (a call_module) takes
    FakeTensorProp."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    fakes = [n.meta["val"] for n in placeholders]
    mode = next((f.fake_mode for f in fakes if hasattr(f, "fake_mode")), None)
    if mode is None:
        from torch._subclasses.fake_tensor import FakeTensorMode

        mode = FakeTensorMode(allow_non_fake_inputs=True)
    previous = mode.allow_non_fake_inputs
    mode.allow_non_fake_inputs = True
    try:
        if any(n.op == "call_module" for n in gm.graph.nodes):
            FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*fakes)
        else:
            _propagate(gm, mode)
    finally:
        mode.allow_non_fake_inputs = previous
    return gm


def _propagate(gm: GraphModule, mode) -> None:
    env: dict = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = node.meta["val"]
        elif node.op == "get_attr":
            value = operator.attrgetter(node.target)(gm)
            if isinstance(value, torch.Tensor):
                with mode:
                    value = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype,
                                                device=value.device)
            env[node] = value
        elif node.op == "call_function":
            args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: env[n])
            with mode:
                env[node] = node.target(*args, **kwargs)
        else:  # output
            continue
        node.meta["val"] = env[node]


def insert_call(gm: GraphModule, target, args: tuple, anchor: Node, kwargs=None,
                name: str | None = None) -> Node:
    """A new ``target(*args)`` node before ``anchor``, its ``meta['val']`` computed on the
    arguments' FakeTensors and its module stack taken from ``anchor``; ``name``: the node's
    name (made unique), default FX's from the target."""
    with gm.graph.inserting_before(anchor):
        node = gm.graph.create_node("call_function", target, args, kwargs or {}, name=name)
    vals, kwvals = torch.fx.node.map_arg((args, kwargs or {}), lambda a: a.meta["val"])
    mode = next(v.fake_mode for v in torch.utils._pytree.tree_leaves((vals, kwvals))
                if hasattr(v, "fake_mode"))
    with mode:
        node.meta["val"] = target(*vals, **kwvals)
    for key in ("nn_module_stack", "stack_trace", "custom"):  # custom: torchscript.py
        if key in anchor.meta:
            node.meta[key] = anchor.meta[key]
    return node


# Note [Dead code, users first]
# torch.fx's ``Graph.eliminate_dead_code`` lints the whole graph first and asks every node
# ``is_impure`` (a schema and registry lookup) before looking at its users, though only a
# node without users can go. On BERT-base's lowering its four calls cost 14 ms of 55
# (issue 25). ``remove_dead_nodes`` removes the same nodes, in the same reverse order:
# it asks ``is_impure`` (with torch's default, random ops impure) only of nodes without
# users, and leaves the lint to the pipeline, which lints once after the last pass.
def remove_dead_nodes(gm: GraphModule) -> bool:
    """Erase every node without users that has no side effects, last first, in ``gm`` and
    in the subgraph modules its ``get_attr`` nodes name (as ``eliminate_dead_code`` does);
    True if any was erased. Note [Dead code, users first]."""
    changed = False
    for node in reversed(gm.graph.nodes):
        if not node.users and not node.is_impure():
            gm.graph.erase_node(node)
            changed = True
    named = {n.target for n in gm.graph.find_nodes(op="get_attr")}
    for name, child in gm.named_children():
        if name in named and isinstance(child, GraphModule) and remove_dead_nodes(child):
            child.recompile()
            changed = True
    return changed
