"""Decompositions that are one op with its arguments rearranged, done by editing the node
instead of tracing (``decompositions.decompose_locally`` traces every distinct signature
with make_fx, ~3 ms apiece: 11 of resnet18's 20 convolutions, a quarter of its lowering).
The new node is the one torch's decomposition gives and holds the same value, so it takes
the old node's metadata (its FakeTensor included) as it is."""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

aten = torch.ops.aten

# conv{1,2,3}d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) is
# convolution(input, weight, bias, stride, padding, dilation, False, [0] * k, groups) on a
# batched input (an unbatched one is unsqueezed first: traced as before).
_CONVOLUTIONS = {aten.conv1d.default: 1, aten.conv2d.default: 2, aten.conv3d.default: 3}
_DEFAULTS = (None, None, None, 1, 0, 1, 1)


def rewrite_directly(gm: GraphModule, node: Node) -> bool:
    """Replace ``node`` by its one-op decomposition where it has one; False (nothing
    changed) where it has not, or its arguments are not in the form handled here."""
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
    with gm.graph.inserting_before(node):
        new = gm.graph.call_function(aten.convolution.default, (
            x, weight, bias, *lists, False, [0] * spatial, groups))
    new.meta = dict(node.meta)
    node.replace_all_uses_with(new)
    gm.graph.erase_node(node)
    return True
