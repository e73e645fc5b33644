"""Decompositions that are one op with its arguments rearranged, done by editing the node
instead of tracing (``decompositions.decompose_locally`` traces every distinct signature
with make_fx, ~3 ms apiece: 11 of resnet18's 20 convolutions and 5 of its batch norms, a
third of its lowering). The new nodes are those the stock decomposition gives (torch's for
convolutions, ours for eval-mode batch norm) and hold the same value, so they take the old
node's metadata (its FakeTensor included); a new multi-output node's value is computed on
the FakeTensors of its arguments."""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node

from .meta import insert_call

aten = torch.ops.aten

# conv{1,2,3}d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) is
# convolution(input, weight, bias, stride, padding, dilation, False, [0] * k, groups) on a
# batched input (an unbatched one is unsqueezed first: traced as before).
_CONVOLUTIONS = {aten.conv1d.default: 1, aten.conv2d.default: 2, aten.conv3d.default: 3}
_DEFAULTS = (None, None, None, 1, 0, 1, 1)


def rewrite_directly(gm: GraphModule, node: Node) -> bool:
    """Replace ``node`` by its one-op decomposition where it has one; False (nothing
    changed) where it has not, or its arguments are not in the form handled here."""
    if node.target is aten.batch_norm.default:
        return _batch_norm(gm, node)
    spatial = _CONVOLUTIONS.get(node.target)
    if spatial is None or node.kwargs or len(node.args) < 2:
        return False
    x, weight, bias, *lists, groups = list(node.args) + list(_DEFAULTS[len(node.args):])
    value = x.meta.get("val") if isinstance(x, Node) else None
    if not isinstance(value, torch.Tensor) or value.dim() != spatial + 2 \
            or not isinstance(groups, int):
        return False
    for i, item in enumerate(lists):
        lists[i] = [item] * spatial if isinstance(item, int) else list(item)
        if len(lists[i]) != spatial:
            return False
    with gm.graph.inserting_before(node):  # named as the traced route names it
        new = gm.graph.create_node("call_function", aten.convolution.default, (
            x, weight, bias, *lists, False, [0] * spatial, groups), name="convolution")
    new.meta = dict(node.meta)
    node.replace_all_uses_with(new)
    gm.graph.erase_node(node)
    return True


def _batch_norm(gm: GraphModule, node: Node) -> bool:
    """batch_norm(input, weight, bias, mean, var, False, momentum, eps, cudnn) is
    _native_batch_norm_legit_no_training(input, weight, bias, mean, var, momentum, eps)[0]
    (``decompositions.batch_norm``); training mode keeps the traced route."""
    if node.kwargs or len(node.args) != 9:
        return False
    x, weight, bias, mean, var, training, momentum, eps, _ = node.args
    if training is not False or not isinstance(mean, Node) or not isinstance(var, Node):
        return False
    norm = insert_call(gm, aten._native_batch_norm_legit_no_training.default,
                       (x, weight, bias, mean, var, momentum, eps), node,
                       name="_native_batch_norm_legit_no_training")
    norm.meta = {**{k: v for k, v in node.meta.items() if k != "tensor_meta"},
                 "val": norm.meta["val"]}
    with gm.graph.inserting_before(node):
        item = gm.graph.create_node("call_function", operator.getitem, (norm, 0),
                                    name="getitem")
    item.meta = dict(node.meta)
    node.replace_all_uses_with(item)
    gm.graph.erase_node(node)
    return True
