"""Lowering passes. Each is ``(gm, settings) -> gm`` and leaves the graph valid
(lint + recompile, done by the pipeline after every pass)."""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from ..settings import CompilationSettings

aten = torch.ops.aten

NOOP_OPS = {aten.detach.default, aten.alias.default, aten.lift_fresh_copy.default,
            aten.dropout.default, aten.feature_dropout.default, aten.alpha_dropout.default}
ASSERT_OPS = {aten._assert_async.msg, aten._assert_scalar.default,
              aten.sym_constrain_range_for_size.default, aten.sym_constrain_range.default,
              aten._assert_tensor_metadata.default}


def remove_noops(gm: GraphModule, settings: CompilationSettings) -> GraphModule:
    """Drop inference no-ops: detach, alias, dropout in eval, and dtype casts that do not
    change the dtype. (``clone`` stays: in a PyTorch segment it makes a tensor contiguous
    for a later ``view``; in TensorRT its converter is an identity.)

    Before: ``y = aten.detach(x); z = aten.dropout(y, 0.1, False); out = relu(z)``
    After:  ``out = relu(x)``"""
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        is_copy = node.target == aten._to_copy.default and _same_meta(node) and set(
            node.kwargs) <= {"dtype", "device", "layout"}
        if node.target in NOOP_OPS or is_copy:
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
        elif node.target == aten.native_dropout.default:
            for user in list(node.users):
                if user.target is operator.getitem and user.args[1] == 0:
                    user.replace_all_uses_with(node.args[0])
                    gm.graph.erase_node(user)
            if not node.users:
                gm.graph.erase_node(node)
    return gm


def _same_meta(node: Node) -> bool:
    src, out = node.args[0].meta.get("val"), node.meta.get("val")
    return (isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor)
            and src.dtype == out.dtype and src.device == out.device)


def remove_asserts(gm: GraphModule, settings: CompilationSettings) -> GraphModule:
    """Remove runtime shape/metadata assertions and export's input-guard call; the guards
    were settled at capture (seed 001: exceptions cannot exist inside a TensorRT engine).

    Before: ``aten._assert_scalar(ge, 'size >= 2'); y = relu(x)``   After: ``y = relu(x)``"""
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in ASSERT_OPS:
            gm.graph.erase_node(node)
        elif node.op == "call_module" and node.target == "_guards_fn" and not node.users:
            # torch.export's input guards; compiled engines check their input ranges
            gm.graph.erase_node(node)
    return gm


def _foldable(node: Node, folded: set[Node]) -> bool:
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    if node.target._schema.is_mutable or "nondeterministic_seeded" in node.target.tags:
        return False
    inputs = node.all_input_nodes
    return bool(inputs) and all(n.op == "get_attr" or n in folded for n in inputs)


def _weight_viewed_by(result: torch.Tensor, node: Node, value) -> Node | None:
    """The get_attr node whose storage ``result`` shares (a view of a weight), if any."""
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "get_attr":
            weight = value(n)
            if isinstance(weight, torch.Tensor) and (
                    weight.untyped_storage().data_ptr() == result.untyped_storage().data_ptr()):
                return n
        else:
            todo.extend(n.all_input_nodes)
    return None


def fold_constants(gm: GraphModule, settings: CompilationSettings) -> GraphModule:
    """Evaluate subgraphs whose inputs are all weights and store the results as buffers.

    Before: ``w = get_attr(weight); wt = aten.permute(w, [1, 0]); mm(x, wt)``
    After:  ``wt = get_attr(_folded_0); mm(x, wt)``"""
    folded: set[Node] = set()
    for node in gm.graph.nodes:
        if _foldable(node, folded):
            folded.add(node)
    # Only materialize fold results that are used by something that is not folded.
    roots = [n for n in folded if any(u not in folded for u in n.users)]
    if not roots:
        return gm
    env: dict[Node, object] = {}

    def value(n: Node):
        if n not in env:
            if n.op == "get_attr":
                env[n] = operator.attrgetter(n.target)(gm)
            else:
                args = torch.fx.node.map_arg(n.args, value)
                kwargs = torch.fx.node.map_arg(n.kwargs, value)
                env[n] = n.target(*args, **kwargs)
        return env[n]

    with torch.no_grad():
        for i, node in enumerate(roots):
            result = value(node)
            if not isinstance(result, torch.Tensor):
                continue
            name = f"_folded_{i}"
            while hasattr(gm, name):
                name += "_"
            # A re-layout of one weight (permute, view) stays a view of it: no second copy
            # of the weight; converters read it in that layout (matmul with TRANSPOSE).
            source = _weight_viewed_by(result, node, value)
            gm.register_buffer(name, result if source is not None else result.contiguous())
            with gm.graph.inserting_before(node):
                attr = gm.graph.get_attr(name)
            attr.meta = dict(node.meta)
            if source is not None:
                attr.meta["param_name"] = source.meta.get("param_name", source.target)
            node.replace_all_uses_with(attr)
    gm.graph.eliminate_dead_code()
    return gm
