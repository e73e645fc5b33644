"""``remove_noop_views``: views that keep their input's shape are dropped and a view of a
view reads the first view's input, so min_block_size counts the model's ops, not the
reshapes that capture and decomposition leave between them."""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from ..settings import CompilationSettings

aten = torch.ops.aten

VIEW_OPS = {aten.view.default, aten._unsafe_view.default}


def remove_noop_views(gm: GraphModule, settings: CompilationSettings) -> GraphModule:
    """Drop ``view(x, shape)`` whose result has ``x``'s shape (``input_ids.view(-1, n)`` on a
    ``[1, n]`` input, transformers' ``attn_output.view(b, h, n, d)`` after attention) and
    let ``view(view(x, a), b)`` read ``x`` when ``x`` is contiguous (then any shape of its
    element count is a view of it). A view the graph returns stays, so an output is never
    an input itself; so does every view of symbolic shape (``_value``).

    Why it matters for partitions: GPT-2's ``view(ids)`` and its LM head's
    ``view(view(ln_f))`` made a first and a last TensorRT block of 5 nodes where
    Torch-TensorRT, whose decomposition leaves one reshape, has 4 and keeps them in
    PyTorch (issue 25: 37 engines with add forced to PyTorch, Torch-TensorRT 36).

    Before: ``a = view(x, [1, 128, 768]); b = view(a, [-1, 768]); mm(b, w)``
    (``x`` is ``[1, 128, 768]``)
    After:  ``b = view(x, [-1, 768]); mm(b, w)``"""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in VIEW_OPS:
            continue
        source = node.args[0]
        if not isinstance(source, Node):
            continue
        if source.op == "call_function" and source.target in VIEW_OPS and _contiguous(
                source.args[0]):
            node.args = (source.args[0], *node.args[1:])
            if not source.users:
                gm.graph.erase_node(source)
            source = node.args[0]
        if _same_shape(source, node) and not any(u.op == "output" for u in node.users):
            node.replace_all_uses_with(source)
            gm.graph.erase_node(node)
    return gm


def _value(node) -> torch.Tensor | None:
    """``node``'s value if it is a tensor of static shape: with symbolic sizes, whether two
    shapes are equal or a tensor contiguous depends on how each route of lowering wrote the
    expressions (tests/test_lowering_routes.py), so such views stay."""
    value = node.meta.get("val") if isinstance(node, Node) else None
    if not isinstance(value, torch.Tensor) or not all(isinstance(d, int) for d in value.shape):
        return None
    return value


def _contiguous(node) -> bool:
    value = _value(node)
    return value is not None and value.is_contiguous()


def _same_shape(a: Node, b: Node) -> bool:
    """Whether two nodes' values have the same static shape and dtype."""
    va, vb = _value(a), _value(b)
    return va is not None and vb is not None and (va.shape, va.dtype) == (vb.shape, vb.dtype)
