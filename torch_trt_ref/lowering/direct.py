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


def rewrite_directly(gm: GraphModule, node: Node, values: dict | None = None) -> bool:
    """Replace ``node`` by its one-op decomposition where it has one; False (nothing
    changed) where it has not, or its arguments are not in the form handled here.
    ``values``: FakeTensor values of new nodes computed so far, reused by nodes of the same
    op on inputs of the same shapes (repeated layers), as the traced route shares them."""
    if node.target is aten.batch_norm.default:
        return _batch_norm(gm, node)
    rewrite = _SIMPLE.get(node.target)
    if rewrite is not None:
        return rewrite(gm, node, {} if values is None else values)
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
    _replace(gm, node, aten.convolution.default,  # named as the traced route names it
             (x, weight, bias, *lists, False, [0] * spatial, groups), "convolution")
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
    _replace_by_first_item(gm, node, norm, 1)
    return True


def _transpose(gm: GraphModule, node: Node, values: dict) -> bool:
    """transpose.int(x, a, b) is permute(x, [.., b, .., a, ..]) when x has 2+ dims and a != b
    as given (torch's reference: else ``alias``, left to tracing)."""
    x, *dims = node.args
    value = x.meta.get("val") if isinstance(x, Node) else None
    if node.kwargs or len(dims) != 2 or not isinstance(value, torch.Tensor) \
            or value.dim() < 2 or dims[0] == dims[1]:
        return False
    order = list(range(value.dim()))
    a, b = (d % value.dim() for d in dims)
    order[a], order[b] = order[b], order[a]
    _replace(gm, node, aten.permute.default, (x, order), "permute")
    return True


def _dropout(gm: GraphModule, node: Node, values: dict) -> bool:
    """dropout(x, p, train=False) is x."""
    if node.kwargs or len(node.args) != 3 or node.args[2] is not False \
            or not isinstance(node.args[0], Node):
        return False
    node.replace_all_uses_with(node.args[0])
    gm.graph.erase_node(node)
    return True


def _layer_norm(gm: GraphModule, node: Node, values: dict) -> bool:
    """layer_norm(x, shape, weight, bias, eps, cudnn) is native_layer_norm(x, shape, weight,
    bias, eps)[0] (and two unused getitems, as the traced route leaves them)."""
    if node.kwargs or len(node.args) != 6:
        return False
    x, shape, weight, bias, eps, _ = node.args
    norm = _call(gm, aten.native_layer_norm.default, (x, shape, weight, bias, eps), node,
                 "native_layer_norm", values)
    _replace_by_first_item(gm, node, norm, 3)
    return True


def _replace_by_first_item(gm: GraphModule, node: Node, multi: Node, count: int) -> None:
    """``node`` replaced by item 0 of the multi-output ``multi``, after a getitem of each of
    its ``count`` items (the unused ones as the traced route leaves them, for DCE)."""
    items = []
    with gm.graph.inserting_before(node):
        for i in range(count):
            items.append(gm.graph.create_node("call_function", operator.getitem, (multi, i),
                                              name="getitem" if i == 0 else f"getitem_{i}"))
            items[-1].meta = {**multi.meta, "val": multi.meta["val"][i]}
    items[0].meta = dict(node.meta)
    node.replace_all_uses_with(items[0])
    gm.graph.erase_node(node)


def _linear(gm: GraphModule, node: Node, values: dict) -> bool:
    """linear(x, w, b) with static sizes is ``decompositions.linear``: addmm(b, x, permute(w,
    [1, 0])) with a bias, mm without (permute first: matmul's order), x flattened to 2 dims
    by a view and the result viewed back."""
    if node.kwargs or len(node.args) not in (2, 3):
        return False
    x, weight, bias = (*node.args, None)[:3]
    if not isinstance(x, Node) or not isinstance(weight, Node) \
            or not (bias is None or isinstance(bias, Node)):
        return False
    value, w = x.meta.get("val"), weight.meta.get("val")
    if not isinstance(value, torch.Tensor) or not isinstance(w, torch.Tensor) \
            or value.dim() < 2 or w.dim() != 2 \
            or not all(isinstance(d, int) for d in value.shape) \
            or value.dim() > 2 and not value.is_contiguous():
        return False
    rows = 1
    for d in value.shape[:-1]:
        rows *= d
    if bias is None:  # matmul(x, w.t()): the transpose is traced first
        turned = _call(gm, aten.permute.default, (weight, [1, 0]), node, "permute", values)
    flat = x
    if value.dim() > 2:  # flatten(0, -2): one view of the contiguous input
        flat = _call(gm, aten.view.default, (x, [rows, value.shape[-1]]), node, "view", values)
    if bias is not None:
        turned = _call(gm, aten.permute.default, (weight, [1, 0]), node, "permute", values)
    target, args, name = ((aten.mm.default, (flat, turned), "mm") if bias is None else
                          (aten.addmm.default, (bias, flat, turned), "addmm"))
    if value.dim() == 2:
        _replace(gm, node, target, args, name)
        return True
    out = _call(gm, target, args, node, name, values)
    _replace(gm, node, aten.view.default, (out, [*value.shape[:-1], w.shape[0]]),
             "view_1" if bias is not None else "view")
    return True


def _call(gm: GraphModule, target, args: tuple, node: Node, name: str, values: dict) -> Node:
    """A new ``target(*args)`` node before ``node``, with ``node``'s metadata (its
    ``tensor_meta`` left out) and its own FakeTensor value: computed once per op, arguments
    and input shapes (``values``), as computing it costs ~0.1 ms a node."""
    key = (target, repr(torch.fx.node.map_arg(args, _shape_key)))
    if key not in values:
        values[key] = insert_call(gm, target, args, node, name=name).meta["val"]
        new = node.prev
    else:
        with gm.graph.inserting_before(node):
            new = gm.graph.create_node("call_function", target, args, name=name)
    new.meta = {**{k: v for k, v in node.meta.items() if k != "tensor_meta"},
                "val": values[key]}
    return new


def _shape_key(n: Node):
    val = n.meta.get("val")
    if isinstance(val, torch.Tensor):
        return (tuple(map(str, val.shape)), tuple(map(str, val.stride())), val.dtype,
                val.device)
    return ("value", str(val))


def _replace(gm: GraphModule, node: Node, target, args: tuple, name: str,
             kwargs: dict | None = None) -> None:
    """One new ``target(*args, **kwargs)`` node in place of ``node``, holding its value (and
    meta)."""
    with gm.graph.inserting_before(node):
        new = gm.graph.create_node("call_function", target, args, kwargs, name=name)
    new.meta = dict(node.meta)
    node.replace_all_uses_with(new)
    gm.graph.erase_node(node)


def _reshape(gm: GraphModule, node: Node, values: dict) -> bool:
    """reshape(x, shape) with static sizes is view(x, shape): for a contiguous x the shape
    as given, for a non-contiguous x that a view can read (BERT's attention output, viewed
    as it is) the shape with -1 worked out (torch's kernels). A copy is left to tracing."""
    if node.kwargs or len(node.args) != 2 or not isinstance(node.args[0], Node):
        return False
    x, shape = node.args
    value = x.meta.get("val")
    if not isinstance(value, torch.Tensor) or not isinstance(shape, (list, tuple)) \
            or not all(isinstance(d, int) for d in (*value.shape, *shape)):
        return False
    if not value.is_contiguous():
        try:
            shape = list(value.view(shape).shape)
        except (RuntimeError, ValueError):  # not viewable: reshape copies
            return False
    _replace(gm, node, aten.view.default, (x, list(shape)), "view")
    return True


def _arange(gm: GraphModule, node: Node, values: dict) -> bool:
    """arange.default(end, dtype=, device=, pin_memory=) as torch.export records it is
    arange.start_step(0, end, dtype=, layout=strided, device=, pin_memory=) (torch's
    reference; the dtype only where one was given)."""
    kwargs = dict(node.kwargs)
    if len(node.args) != 1 or not {"device", "pin_memory"} <= set(kwargs) \
            or not set(kwargs) <= {"dtype", "layout", "device", "pin_memory"}:
        return False
    new = {"dtype": kwargs["dtype"]} if "dtype" in kwargs else {}
    new.update(layout=kwargs.get("layout", torch.strided), device=kwargs["device"],
               pin_memory=kwargs["pin_memory"])
    _replace(gm, node, aten.arange.start_step, (0, node.args[0]), "arange", new)
    return True


def _max_pool2d(gm: GraphModule, node: Node, values: dict) -> bool:
    """max_pool2d(x, ...) is max_pool2d_with_indices(x, ...)[0], the arguments as given (and
    an unused getitem of the indices, as the traced route leaves it)."""
    if node.kwargs or not isinstance(node.args[0], Node):
        return False
    pool = _call(gm, aten.max_pool2d_with_indices.default, tuple(node.args), node,
                 "max_pool2d_with_indices", values)
    _replace_by_first_item(gm, node, pool, 2)
    return True


def _adaptive_avg_pool2d(gm: GraphModule, node: Node, values: dict) -> bool:
    """adaptive_avg_pool2d(x, size) of a contiguous x with static sizes is mean.dim(x, [-1,
    -2], True) for a 1x1 output, else _adaptive_avg_pool2d(x, size) (torch's kernel; a
    channels-last x also gets a copy: left to tracing)."""
    if node.kwargs or len(node.args) != 2 or not isinstance(node.args[0], Node):
        return False
    x, size = node.args
    value = x.meta.get("val")
    if not isinstance(value, torch.Tensor) or not isinstance(size, (list, tuple)) \
            or not all(isinstance(d, int) for d in (*value.shape, *size)) \
            or not value.is_contiguous():
        return False
    if list(size) == [1, 1]:
        _replace(gm, node, aten.mean.dim, (x, [-1, -2], True), "mean")
    else:
        _replace(gm, node, aten._adaptive_avg_pool2d.default, (x, list(size)),
                 "_adaptive_avg_pool2d")
    return True


def _flatten(gm: GraphModule, node: Node, values: dict) -> bool:
    """flatten.using_ints(x, start, end) of a contiguous x with static sizes, start before
    end, is view(x, the flattened sizes) (torch's kernel; else a copy or x itself: left to
    tracing)."""
    if node.kwargs or not isinstance(node.args[0], Node):
        return False
    x, start, end = (*node.args, 0, -1)[:3] if len(node.args) == 1 else \
        (*node.args, -1)[:3]
    value = x.meta.get("val")
    if not isinstance(value, torch.Tensor) or not isinstance(start, int) \
            or not isinstance(end, int) or value.dim() == 0 \
            or not all(isinstance(d, int) for d in value.shape) or not value.is_contiguous():
        return False
    start, end = start % value.dim(), end % value.dim()
    if start >= end:
        return False
    inner = 1
    for d in value.shape[start:end + 1]:
        inner *= d
    shape = [*value.shape[:start], inner, *value.shape[end + 1:]]
    _replace(gm, node, aten.view.default, (x, shape), "view")
    return True


def _to(gm: GraphModule, node: Node, values: dict) -> bool:
    """to.dtype_layout(x, dtype=, layout=, device=) to what x already is, is x (torch's
    reference; torch.export put its ``_assert_tensor_metadata`` before it already)."""
    x = node.args[0] if len(node.args) == 1 else None
    value = x.meta.get("val") if isinstance(x, Node) else None
    kwargs = dict(node.kwargs)
    if not isinstance(value, torch.Tensor) or set(kwargs) != {"dtype", "layout", "device"} \
            or kwargs["dtype"] != value.dtype or kwargs["layout"] != torch.strided \
            or value.layout != torch.strided or torch.device(kwargs["device"]) != value.device:
        return False
    node.replace_all_uses_with(x)
    gm.graph.erase_node(node)
    return True


def _new_ones(gm: GraphModule, node: Node, values: dict) -> bool:
    """new_ones(x, size, dtype=, pin_memory=) is full(size, 1, dtype= (x's if not given),
    layout=strided, device=x's, pin_memory=) (True for bool; torch's reference)."""
    x = node.args[0] if len(node.args) == 2 else None
    value = x.meta.get("val") if isinstance(x, Node) else None
    kwargs = dict(node.kwargs)
    if not isinstance(value, torch.Tensor) or not isinstance(node.args[1], (list, tuple)) \
            or not set(kwargs) <= {"dtype", "pin_memory"}:
        return False
    dtype = kwargs.get("dtype") or value.dtype
    if dtype.is_floating_point or dtype.is_complex:
        return False  # left to tracing
    _replace(gm, node, aten.full.default,
             (list(node.args[1]), True if dtype == torch.bool else 1), "full",
             {"dtype": dtype, "layout": torch.strided, "device": value.device,
              "pin_memory": kwargs.get("pin_memory", False)})
    return True


def _diff(gm: GraphModule, node: Node, values: dict) -> bool:
    """diff(x, 1, dim, prepend) with static sizes, no append, not bool, is sub(slice(y, dim,
    1, n), slice(y, dim, 0, n - 1)) with y = cat([prepend, x], dim) or x (torch's
    reference)."""
    if node.kwargs or not 1 <= len(node.args) <= 5 or not isinstance(node.args[0], Node):
        return False
    x, n, dim, prepend, append = (*node.args, *(1, -1, None, None)[len(node.args) - 1:])
    value = x.meta.get("val")
    if append is not None:
        return False
    parts = [prepend, x] if prepend is not None else [x]
    vals = [p.meta.get("val") if isinstance(p, Node) else None for p in parts]
    if n != 1 or not isinstance(dim, int) or not all(isinstance(v, torch.Tensor) for v in vals) \
            or value.dtype == torch.bool \
            or not all(isinstance(d, int) for v in vals for d in v.shape):
        return False
    length = sum(v.shape[dim] for v in vals)
    y = x
    if prepend is not None:
        y = _call(gm, aten.cat.default, ([prepend, x], dim), node, "cat", values)
    low = _call(gm, aten.slice.Tensor, (y, dim, 0, length - 1), node, "slice", values)
    high = _call(gm, aten.slice.Tensor, (y, dim, 1, length), node, "slice", values)
    _replace(gm, node, aten.sub.Tensor, (high, low), "sub")
    return True


def _and(gm: GraphModule, node: Node, values: dict) -> bool:
    """__and__.Tensor(a, b) is bitwise_and.Tensor(a, b)."""
    if node.kwargs or len(node.args) != 2:
        return False
    _replace(gm, node, aten.bitwise_and.Tensor, tuple(node.args), "bitwise_and")
    return True


def _split(gm: GraphModule, node: Node, values: dict) -> bool:
    """split.Tensor(x, size, dim) with static sizes is split_with_sizes(x, [size, ...,
    rest], dim), each item read by a new getitem (as the traced route makes them)."""
    if node.kwargs or len(node.args) not in (2, 3) or not isinstance(node.args[0], Node):
        return False
    x, size, dim = (*node.args, 0) if len(node.args) == 2 else node.args
    value = x.meta.get("val")
    if not isinstance(value, torch.Tensor) or not isinstance(size, int) or size <= 0 \
            or not isinstance(dim, int) or not all(isinstance(d, int) for d in value.shape) \
            or any(u.op != "call_function" or u.target is not operator.getitem
                   for u in node.users):
        return False
    length = value.shape[dim]
    sizes = [size] * (length // size) + ([length % size] if length % size else [])
    if not sizes:
        return False
    parts = _call(gm, aten.split_with_sizes.default, (x, sizes, dim), node, "split_with_sizes",
                  values)
    items = []
    with gm.graph.inserting_before(node):
        for i in range(len(sizes)):
            items.append(gm.graph.create_node("call_function", operator.getitem, (parts, i),
                                              name="getitem" if i == 0 else f"getitem_{i}"))
            items[-1].meta = {**parts.meta, "val": parts.meta["val"][i]}
    for user in list(node.users):
        user.replace_all_uses_with(items[user.args[1]])
        gm.graph.erase_node(user)
    gm.graph.erase_node(node)
    return True


_SIMPLE = {aten.transpose.int: _transpose, aten.dropout.default: _dropout,
           aten.layer_norm.default: _layer_norm, aten.linear.default: _linear,
           aten.reshape.default: _reshape, aten.__and__.Tensor: _and,
           aten.split.Tensor: _split, aten.arange.default: _arange,
           aten.max_pool2d.default: _max_pool2d,
           aten.adaptive_avg_pool2d.default: _adaptive_avg_pool2d,
           aten.flatten.using_ints: _flatten, aten.to.dtype_layout: _to,
           aten.new_ones.default: _new_ones, aten.diff.default: _diff}
