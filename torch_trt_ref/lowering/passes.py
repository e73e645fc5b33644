"""The lowering passes of the pipeline (remove_noops, remove_asserts, fold_constants,
split_tied_embeddings). Each is ``(gm, settings) -> gm``, edits the graph only (never runs the
module) and leaves it valid (the pipeline lints after the last pass)."""

from __future__ import annotations

import logging
import operator

import torch
from torch.fx import GraphModule, Node

from ..settings import CompilationSettings
from ..threads import one_thread
from ..weights import traced, untraced
from .meta import insert_call, remove_dead_nodes

log = logging.getLogger(__name__)

aten = torch.ops.aten

NOOP_OPS = {aten.detach.default, aten.alias.default, aten.lift_fresh_copy.default,
            aten.dropout.default, aten.feature_dropout.default, aten.alpha_dropout.default}
DROPOUT_OPS = {aten.dropout.default, aten.feature_dropout.default,
               aten.alpha_dropout.default, aten.native_dropout.default}
ASSERT_OPS = {aten._assert_async.msg, aten._assert_scalar.default,
              aten.sym_constrain_range_for_size.default, aten.sym_constrain_range.default,
              aten._assert_tensor_metadata.default}


def remove_noops(gm: GraphModule, settings: CompilationSettings) -> GraphModule:
    """Drop inference no-ops: detach, alias, dropout in eval (``train=False``; an explicit
    training-mode dropout stays and runs in PyTorch), and dtype casts that do not change
    the dtype. (``clone`` stays: in a PyTorch segment it makes a tensor contiguous
    for a later ``view``; in TensorRT its converter is an identity.)

    Before: ``y = aten.detach(x); z = aten.dropout(y, 0.1, False); out = relu(z)``
    After:  ``out = relu(x)``"""
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        is_copy = node.target == aten._to_copy.default and _same_meta(node) and set(
            node.kwargs) <= {"dtype", "device", "layout"}
        if node.target in DROPOUT_OPS and _trains(node):
            continue  # dropout asked for explicitly (training=True) stays: it is random
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


def _trains(node: Node) -> bool:
    """Whether a dropout node runs in training mode (its ``train`` argument is not False):
    ``F.dropout(x, p, training=True)`` in an eval model (Monte Carlo dropout) must still
    drop, so it is not a no-op."""
    train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train", True)
    p = node.args[1] if len(node.args) > 1 else node.kwargs.get("p", 0.5)
    return train is not False and p != 0


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


_UNINITIALIZED = ("aten::empty", "aten::new_empty")  # empty, empty_strided, empty_permuted, ...
_QUANTIZERS = ("tensorrt::quantize_op", "tensorrt::dynamic_block_quantize_op")  # DESIGN D13


def _foldable(node: Node, folded: set[Node]) -> bool:
    """A deterministic, non-mutating ATen call whose node inputs are all weights or folded
    nodes; with no node inputs at all (``arange(0, 128)``, ``full(...)``: constant-only
    subgraphs such as a static mask or cache position) it is foldable too, unless its
    result is uninitialized memory (``empty``)."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    if node.target._schema.is_mutable or torch.Tag.nondeterministic_seeded in node.target.tags:
        return False
    if node.target._schema.name.startswith(_UNINITIALIZED + _QUANTIZERS):
        return False  # a quantizer stays a node: TensorRT folds it into the weight it reads
    return all(n.op == "get_attr" or n in folded for n in node.all_input_nodes)


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
            with untraced():  # storage addresses: nothing to trace
                if isinstance(weight, torch.Tensor) and (weight.untyped_storage().data_ptr()
                                                         == result.untyped_storage().data_ptr()):
                    return n
        else:
            todo.extend(n.all_input_nodes)
    return None


def fold_constants(gm: GraphModule, settings: CompilationSettings) -> GraphModule:
    """Evaluate subgraphs whose inputs are all weights or that have no inputs (constant-only
    subgraphs, as Torch-TensorRT's constant folding does) and store the results as buffers.
    A result that cannot be computed here (an op that fails on this device) stays a node.

    Before: ``w = get_attr(weight); wt = aten.permute(w, [1, 0]); mm(x, wt)``
    After:  ``wt = get_attr(_folded_0); mm(x, wt)``

    Why constant-only subgraphs matter for partitions: transformers' GPT-2 and T5 build the
    cache position and causal-mask buckets from ``arange`` plus constants; unfolded, those
    integer ``add``/``mul`` nodes sit before the first layer, and forcing ``add`` to
    PyTorch cut engines there that Torch-TensorRT does not have."""
    folded: set[Node] = set()
    for node in gm.graph.nodes:
        if _foldable(node, folded):
            folded.add(node)
    # Only materialize fold results that are used by something that is not folded, and
    # not a lone creation op (``full``, ``arange`` with no node inputs): its converter makes
    # the same constant, so folding it would only hide the op from the graph.
    # in graph order, so the buffers are numbered the same in every process
    roots = [n for n in gm.graph.nodes if n in folded and n.all_input_nodes
             and any(u not in folded for u in n.users)]
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

    # refit replays these computations (Note [Weight program]); the constants are small
    with torch.no_grad(), traced(), one_thread():
        for i, node in enumerate(roots):
            try:
                result = value(node)
            except Exception as err:  # noqa: BLE001  (e.g. a device this machine lacks)
                log.debug("fold_constants: %s stays a node: %s", node.name, err)
                continue
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
            attr.meta = {**node.meta, "folded": True}  # (Note [A model already in the
            if source is not None:  # compile precision] in precision.py)
                attr.meta["param_name"] = source.meta.get("param_name", source.target)
            node.replace_all_uses_with(attr)
    remove_dead_nodes(gm)
    return gm


ROW_ALIGNMENT = 8


def split_tied_embeddings(gm: GraphModule, settings: CompilationSettings) -> GraphModule:
    """Split a weight that an embedding looks up and a matrix multiply reads transposed (a
    language model's tied input embedding and output head) into rows a multiple of 8 and a
    tail of fewer than 8 rows, when its row count is not a multiple of 8.

    TensorRT pads such a weight for its GEMM and then stores it twice, once per consumer
    (GPT-2, 50257 rows: a 626 MiB plan for 475 MiB of weights, and a builder peak ~300 MiB
    higher). After the split both consumers read the aligned head, stored once; the tail is
    looked up by a second gather and multiplied as a product and sum, not a GEMM, which the
    builder would merge back into one padded weight. Head and tail are views of the weight.

    Before: ``e = embedding(w, ids); ...; y = mm(x, permute(w, [1, 0]))``
    After:  ``e = where(ids < n, embedding(w[:n], min(ids, n - 1)),
                        embedding(w[n:], max(ids - n, 0)))``
            ``y = cat([mm(x, permute(w[:n], [1, 0])), sum(x[:, None] * w[n:], -1)], 1)``"""
    by_tensor: dict[tuple, list[Node]] = {}
    transposed: dict[tuple, list[Node]] = {}  # folded transposes: views w.t() of a weight
    for node in gm.graph.find_nodes(op="get_attr"):
        weight = operator.attrgetter(node.target)(gm)
        if not (isinstance(weight, torch.Tensor) and weight.dim() == 2
                and weight.is_floating_point() and hasattr(node.meta.get("val"), "fake_mode")):
            continue
        if weight.shape[0] > ROW_ALIGNMENT and weight.shape[0] % ROW_ALIGNMENT:
            key = (weight.data_ptr(), tuple(weight.shape), weight.stride(), weight.dtype)
            by_tensor.setdefault(key, []).append(node)
        key = (weight.data_ptr(), tuple(weight.shape)[::-1], weight.stride()[::-1], weight.dtype)
        transposed.setdefault(key, []).append(node)
    for key, nodes in by_tensor.items():
        lookups = [u for n in nodes for u in n.users
                   if u.target == aten.embedding.default and u.args[0] is n]
        reads = [t for n in nodes for t in n.users if _is_transpose(t)] + transposed.get(key, [])
        heads = [mm for t in reads for mm in t.users
                 if mm.target == aten.mm.default and mm.args[1] is t]
        if lookups and heads:
            _split_rows(gm, nodes[0], lookups, heads)
    remove_dead_nodes(gm)
    return gm


def _is_transpose(node: Node) -> bool:
    return (node.target == aten.t.default
            or (node.target == aten.permute.default and list(node.args[1]) == [1, 0]))


def _split_rows(gm: GraphModule, weight: Node, lookups: list[Node], heads: list[Node]) -> None:
    rows = weight.meta["val"].shape[0]
    n = rows - rows % ROW_ALIGNMENT

    def add(target, *args, anchor: Node) -> Node:
        return insert_call(gm, target, args, anchor)

    # One head and one tail view, made right after the weight, serve every consumer.
    head = add(aten.slice.Tensor, weight, 0, 0, n, anchor=weight.next)
    tail = add(aten.slice.Tensor, weight, 0, n, rows, anchor=head.next)
    for lookup in lookups:
        ids = lookup.args[1]
        in_head = add(aten.embedding.default, head,
                      add(aten.clamp.default, ids, None, n - 1, anchor=lookup), anchor=lookup)
        shifted = add(aten.sub.Tensor, ids, n, anchor=lookup)
        in_tail = add(aten.embedding.default, tail,
                      add(aten.clamp.default, shifted, 0, None, anchor=lookup), anchor=lookup)
        which = add(aten.unsqueeze.default, add(aten.lt.Scalar, ids, n, anchor=lookup), -1,
                    anchor=lookup)
        lookup.replace_all_uses_with(add(aten.where.self, which, in_head, in_tail,
                                         anchor=lookup))
    for mm in heads:
        x = mm.args[0]
        product = add(aten.mm.default, x, add(aten.permute.default, head, [1, 0], anchor=mm),
                      anchor=mm)
        products = add(aten.mul.Tensor, add(aten.unsqueeze.default, x, 1, anchor=mm), tail,
                       anchor=mm)
        tail_product = add(aten.sum.dim_IntList, products, [2], anchor=mm)
        mm.replace_all_uses_with(add(aten.cat.default, [product, tail_product], 1, anchor=mm))


