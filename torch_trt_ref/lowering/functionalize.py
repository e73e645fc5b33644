"""``functionalize_inplace``: in-place ops become out-of-place (the first step of the
node-by-node lowering route, ``routes.node_by_node``), writes through views of a fresh
value become scatters into it, eval-mode in-place dropout is dropped."""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from .decompositions import NotLocallyLowerable
from .meta import insert_call

aten = torch.ops.aten


def _returns_alias(node: Node) -> bool:
    """Whether ``node``'s value may share memory with another node's (a view, or an item of
    a multi-output op that returns views)."""
    if node.target is operator.getitem:
        node = node.args[0]
    if not isinstance(node.target, torch._ops.OpOverload):
        return node.op == "call_function"  # unknown callables: assume the worst
    return any(r.alias_info is not None for r in node.target._schema.returns)


DROPOUT_INPLACE = {aten.dropout_.default, aten.feature_dropout_.default,
                   aten.alpha_dropout_.default, aten.feature_alpha_dropout_.default}
# View ops an in-place write may go through, and the ops writing a value back through them.
SCATTER_OF = {aten.slice.Tensor: aten.slice_scatter.default,
              aten.select.int: aten.select_scatter.default}


def _is_eval_dropout(node: Node) -> bool:
    train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train", True)
    return node.target in DROPOUT_INPLACE and train is False


def _writes(node: Node) -> bool:
    return (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
            and node.target._schema.is_mutable)


def writes_in_place(gm: GraphModule) -> bool:
    """Does any node of ``gm`` write in place (what ``functionalize_inplace`` rewrites)?"""
    return any(_writes(node) for node in gm.graph.nodes)


def _view_chain(node: Node) -> list[Node]:
    """[base, view, ..., node]: ``node`` reached from its base through slice/select views."""
    chain = [node]
    while chain[0].target in SCATTER_OF:
        chain.insert(0, chain[0].args[0])
    return chain


def _inplace_blocker(node: Node, order: dict[Node, int]) -> str | None:
    """Why ``functionalize_inplace`` cannot rewrite ``node`` (None if it can, or if it writes
    nothing). It can when ``node`` writes its first argument only, that argument is a fresh
    value or slices/selects of one, and no other view of it made before the write exists."""
    op = node.target
    if not _writes(node) or _is_eval_dropout(node):
        return None
    target = node.args[0] if node.args else None
    if (_out_of_place(op) is None or not isinstance(target, Node)
            or any(a.alias_info is not None and a.alias_info.is_write
                   for a in op._schema.arguments[1:])):
        return f"{node.name}: {op} has no out-of-place form here"
    chain = _view_chain(target)
    base = chain[0]
    if base.op != "call_function" or _returns_alias(base):
        return f"{node.name}: {op} writes to {base.op} {base.name}, which may be aliased"
    for viewed in chain:
        for user in viewed.users:
            if (user is not node and user not in chain and _returns_alias(user)
                    and order[user] < order[node]):
                return f"{node.name}: {op} writes to {viewed.name}, also viewed by {user.name}"
    return None


def functionalize_inplace(gm: GraphModule) -> GraphModule:
    """Replace each in-place op by its out-of-place form; later readers of the written value
    read the result. A write through slices/selects of a value (``mask[a:b, c:d] = k``)
    becomes the out-of-place op on the slice, scattered back into the value
    (``slice_scatter``). In-place dropout in eval mode writes nothing and is dropped.
    torch.export's pre-dispatch IR keeps torchvision's ``relu_``/``add_`` and swin's mask
    fills; TensorRT and the partitioner need values, not writes. Raises NotLocallyLowerable
    for a write to an input or a weight, or one another view would observe
    (``_inplace_blocker``): only full functionalization handles those.

    Before: ``y = aten.relu_(x); z = aten.add(x, 1)``
    After:  ``y = aten.relu(x); z = aten.add(y, 1)``

    Before: ``m = zeros(4, 4); s = slice(m, 0, 0, 2); fill_(s, 1); out = add(m, x)``
    After:  ``m = zeros(4, 4); s = slice(m, 0, 0, 2); f = fill(s, 1);
              m2 = slice_scatter(m, f, 0, 0, 2); out = add(m2, x)``

    A write through two views (``m[a:b, c:d] = k``) scatters into the first view made again
    from ``m``: ``s1 = slice(m); s2 = slice(s1); f = fill(s2, k); s1b = slice(m);
    t = slice_scatter(s1b, f, 1, c, d); m2 = slice_scatter(m, t, 0, a, b)``."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for node in list(gm.graph.nodes):
        reason = _inplace_blocker(node, order)
        if reason is not None:
            raise NotLocallyLowerable(reason)
        if not _writes(node):
            continue
        if _is_eval_dropout(node):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
            continue
        chain = _view_chain(node.args[0])
        updated = {chain[-1]: insert_call(gm, _out_of_place(node.target), node.args, node,
                                           node.kwargs)}
        # The scatter bases are the intermediate views made again from the base, as
        # functionalization (run_decompositions) regenerates them, so both routes give the
        # same ops (tests/test_lowering_routes.py).
        bases = [chain[0]]
        for view in chain[1:-1]:
            bases.append(insert_call(gm, view.target, (bases[-1], *view.args[1:]), node,
                                      view.kwargs))
        for view, parent, base in zip(reversed(chain[1:]), reversed(chain[:-1]),
                                      reversed(bases)):
            updated[parent] = insert_call(gm, SCATTER_OF[view.target],
                                           (base, updated[view], *view.args[1:]), node,
                                           view.kwargs)
        for new in (*bases[1:], *updated.values()):
            order.setdefault(new, order[node])
        node.replace_all_uses_with(updated[chain[-1]])
        for value, new in updated.items():
            for user in list(value.users):
                if user not in updated.values() and order[user] > order[node]:
                    user.replace_input_with(value, new)
        gm.graph.erase_node(node)
    return gm


def _out_of_place(op: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """``aten.relu_.default`` -> ``aten.relu.default`` (same overload), if it exists."""
    name = op._schema.name.split("::")[-1]
    if not name.endswith("_") or name.endswith("__"):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    overload = getattr(packet, op._overloadname, None) if packet is not None else None
    return overload if isinstance(overload, torch._ops.OpOverload) else None
