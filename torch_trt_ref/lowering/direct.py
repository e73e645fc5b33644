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

from ..conversion.args import per_dim
from ..conversion.registry import node_args
from .meta import insert_call

aten = torch.ops.aten


def rewrite_directly(gm: GraphModule, node: Node, values: dict | None = None) -> bool:
    """Replace ``node`` by its one-op decomposition where it has one; False (nothing
    changed) where it has not, or its arguments are not in the form handled here.
    The node is bound to its schema once (``node_args``: by name, defaults applied, as
    converters read it); ``values``: FakeTensor values of new nodes computed so far, reused
    by nodes of the same op on inputs of the same shapes (repeated layers), as the traced
    route shares them."""
    rewrite = REWRITES.get(node.target)
    if rewrite is None:
        return False
    return rewrite(gm, node, node_args(node), {} if values is None else values)


def _value(arg):
    """The FakeTensor of a Node argument; None for anything else."""
    return arg.meta.get("val") if isinstance(arg, Node) else None


def _convolution(spatial: int):
    """conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups) is
    convolution(input, weight, bias, stride, padding, dilation, False, [0] * k, groups), the
    int lists expanded per spatial dim as ATen expands them (``args.per_dim``), on a batched
    input (an unbatched one is unsqueezed first: traced as before)."""

    def rewrite(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
        value = _value(a["input"])
        if not isinstance(value, torch.Tensor) or value.dim() != spatial + 2 \
                or not isinstance(a["groups"], int):
            return False
        try:
            lists = [per_dim(a[k], spatial, k) for k in ("stride", "padding", "dilation")]
        except ValueError:  # a length ATen rejects: its error comes from tracing
            return False
        _replace(gm, node, aten.convolution.default,  # named as the traced route names it
                 (a["input"], a["weight"], a["bias"], *lists, False, [0] * spatial,
                  a["groups"]), "convolution")
        return True

    return rewrite


def _batch_norm(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps, ...)
    is _native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var,
    momentum, eps)[0] (``decompositions.batch_norm``); training mode keeps the traced route."""
    mean, var = a["running_mean"], a["running_var"]
    if a["training"] is not False or not isinstance(mean, Node) or not isinstance(var, Node):
        return False
    norm = insert_call(gm, aten._native_batch_norm_legit_no_training.default,
                       (a["input"], a["weight"], a["bias"], mean, var, a["momentum"],
                        a["eps"]), node, name="_native_batch_norm_legit_no_training")
    norm.meta = {**{k: v for k, v in node.meta.items() if k != "tensor_meta"},
                 "val": norm.meta["val"]}
    _replace_by_first_item(gm, node, norm, 1)
    return True


def _transpose(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """transpose.int(x, dim0, dim1) is permute(x, [.., dim1, .., dim0, ..]) when x has 2+
    dims and dim0 != dim1 as given (torch's reference: else ``alias``, left to tracing)."""
    x, dims = a["input"], (a["dim0"], a["dim1"])
    value = _value(x)
    if not isinstance(value, torch.Tensor) or value.dim() < 2 or dims[0] == dims[1]:
        return False
    order = list(range(value.dim()))
    first, second = (d % value.dim() for d in dims)
    order[first], order[second] = order[second], order[first]
    _replace(gm, node, aten.permute.default, (x, order), "permute")
    return True


def _dropout(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """dropout(x, p, train=False) is x."""
    if a["train"] is not False or not isinstance(a["input"], Node):
        return False
    node.replace_all_uses_with(a["input"])
    gm.graph.erase_node(node)
    return True


def _layer_norm(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """layer_norm(x, normalized_shape, weight, bias, eps, cudnn_enable) is
    native_layer_norm(x, normalized_shape, weight, bias, eps)[0] (and two unused getitems,
    as the traced route leaves them)."""
    norm = _call(gm, aten.native_layer_norm.default,
                 (a["input"], a["normalized_shape"], a["weight"], a["bias"], a["eps"]), node,
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


def _linear(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """linear(x, w, b) with static sizes is ``decompositions.linear``: addmm(b, x, permute(w,
    [1, 0])) with a bias, mm without (permute first: matmul's order), x flattened to 2 dims
    by a view and the result viewed back."""
    x, weight, bias = a["input"], a["weight"], a["bias"]
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


def _call(gm: GraphModule, target, args: tuple, node: Node, name: str, values: dict,
          kwargs: dict | None = None) -> Node:
    """A new ``target(*args, **kwargs)`` node before ``node``, with ``node``'s metadata (its
    ``tensor_meta`` left out) and its own FakeTensor value: computed once per op, arguments
    and input shapes (``values``), as computing it costs ~0.1 ms a node."""
    key = (target, repr(torch.fx.node.map_arg((args, kwargs), _shape_key)))
    if key not in values:
        values[key] = insert_call(gm, target, args, node, kwargs, name=name).meta["val"]
        new = node.prev
    else:
        with gm.graph.inserting_before(node):
            new = gm.graph.create_node("call_function", target, args, kwargs, name=name)
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


def _static(*sizes) -> bool:
    """Every size given is a plain int (no symbol)."""
    return all(isinstance(d, int) for d in sizes)


def _reshape(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """reshape(x, shape) with static sizes is view(x, shape): for a contiguous x the shape
    as given, for a non-contiguous x that a view can read (BERT's attention output, viewed
    as it is) the shape with -1 worked out (torch's kernels). A copy is left to tracing."""
    x, shape = a["input"], a["shape"]
    value = _value(x)
    if not isinstance(value, torch.Tensor) or not isinstance(shape, (list, tuple)) \
            or not _static(*value.shape, *shape):
        return False
    if not value.is_contiguous():
        try:
            shape = list(value.view(shape).shape)
        except (RuntimeError, ValueError):  # not viewable: reshape copies
            return False
    _replace(gm, node, aten.view.default, (x, list(shape)), "view")
    return True


def _arange(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """arange.default(end, dtype=, device=, pin_memory=) as torch.export records it (device
    and pin_memory given) is arange.start_step(0, end, dtype=, layout=strided, device=,
    pin_memory=) (torch's reference; the dtype only where one was given)."""
    if a["device"] is None or a["pin_memory"] is None:
        return False
    new = {"dtype": a["dtype"]} if a["dtype"] is not None else {}
    new.update(layout=a["layout"] if a["layout"] is not None else torch.strided,
               device=a["device"], pin_memory=a["pin_memory"])
    _replace(gm, node, aten.arange.start_step, (0, a["end"]), "arange", new)
    return True


def _max_pool2d(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """max_pool2d(x, ...) is max_pool2d_with_indices(x, ...)[0] (and an unused getitem of the
    indices, as the traced route leaves it). The two schemas are one, so the node's
    arguments pass on as recorded (positional, trailing defaults left out, as the traced
    route records them)."""
    if not isinstance(a["input"], Node):
        return False
    pool = _call(gm, aten.max_pool2d_with_indices.default, node.args, node,
                 "max_pool2d_with_indices", values, dict(node.kwargs))
    _replace_by_first_item(gm, node, pool, 2)
    return True


def _adaptive_avg_pool2d(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """adaptive_avg_pool2d(x, output_size) of a contiguous x with static sizes is
    mean.dim(x, [-1, -2], True) for a 1x1 output, else _adaptive_avg_pool2d(x, output_size)
    (torch's kernel; a channels-last x also gets a copy: left to tracing)."""
    x, size = a["input"], a["output_size"]
    value = _value(x)
    if not isinstance(value, torch.Tensor) or not isinstance(size, (list, tuple)) \
            or not _static(*value.shape, *size) or not value.is_contiguous():
        return False
    if list(size) == [1, 1]:
        _replace(gm, node, aten.mean.dim, (x, [-1, -2], True), "mean")
    else:
        _replace(gm, node, aten._adaptive_avg_pool2d.default, (x, list(size)),
                 "_adaptive_avg_pool2d")
    return True


def _flatten(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """flatten.using_ints(x, start_dim, end_dim) of a contiguous x with static sizes, start
    before end, is view(x, the flattened sizes) (torch's kernel; else a copy or x itself:
    left to tracing)."""
    x, start, end = a["input"], a["start_dim"], a["end_dim"]
    value = _value(x)
    if not isinstance(value, torch.Tensor) or not isinstance(start, int) \
            or not isinstance(end, int) or value.dim() == 0 \
            or not _static(*value.shape) or not value.is_contiguous():
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


def _to(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """to.dtype_layout(x, dtype=, layout=strided, device=) to what x already is (no other
    option set) is x (torch's reference; torch.export put its ``_assert_tensor_metadata``
    before it already)."""
    value = _value(a["input"])
    if not isinstance(value, torch.Tensor) or a["dtype"] != value.dtype \
            or a["layout"] != torch.strided or value.layout != torch.strided \
            or a["device"] is None or torch.device(a["device"]) != value.device \
            or a["pin_memory"] is not None or a["non_blocking"] or a["copy"] \
            or a["memory_format"] is not None:
        return False
    node.replace_all_uses_with(a["input"])
    gm.graph.erase_node(node)
    return True


def _new_ones(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """new_ones(x, size, dtype=, pin_memory=) is full(size, 1, dtype= (x's if not given),
    layout=strided, device=x's, pin_memory=bool(pin_memory)) (True for bool; torch's
    reference); a layout or device given is left to tracing."""
    value = _value(a["input"])
    if not isinstance(value, torch.Tensor) or not isinstance(a["size"], (list, tuple)) \
            or a["layout"] is not None or a["device"] is not None:
        return False
    dtype = a["dtype"] or value.dtype
    if dtype.is_floating_point or dtype.is_complex:
        return False  # left to tracing
    _replace(gm, node, aten.full.default,
             (list(a["size"]), True if dtype == torch.bool else 1), "full",
             {"dtype": dtype, "layout": torch.strided, "device": value.device,
              "pin_memory": bool(a["pin_memory"])})
    return True


def _diff(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """diff(x, 1, dim, prepend) with static sizes, no append, not bool, is sub(slice(y, dim,
    1, n), slice(y, dim, 0, n - 1)) with y = cat([prepend, x], dim) or x (torch's
    reference)."""
    x, dim, prepend = a["input"], a["dim"], a["prepend"]
    if not isinstance(x, Node) or a["n"] != 1 or not isinstance(dim, int) \
            or a["append"] is not None:
        return False
    parts = [prepend, x] if prepend is not None else [x]
    vals = [_value(p) for p in parts]
    if not all(isinstance(v, torch.Tensor) for v in vals) or vals[-1].dtype == torch.bool \
            or not all(_static(*v.shape) for v in vals):
        return False
    length = sum(v.shape[dim] for v in vals)
    y = x
    if prepend is not None:
        y = _call(gm, aten.cat.default, ([prepend, x], dim), node, "cat", values)
    low = _call(gm, aten.slice.Tensor, (y, dim, 0, length - 1), node, "slice", values)
    high = _call(gm, aten.slice.Tensor, (y, dim, 1, length), node, "slice", values)
    _replace(gm, node, aten.sub.Tensor, (high, low), "sub")
    return True


def _and(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """__and__.Tensor(a, b) is bitwise_and.Tensor(a, b)."""
    _replace(gm, node, aten.bitwise_and.Tensor, (a["input"], a["other"]), "bitwise_and")
    return True


def _split(gm: GraphModule, node: Node, a: dict, values: dict) -> bool:
    """split.Tensor(x, split_size, dim) with static sizes is split_with_sizes(x, [size, ...,
    rest], dim), each item read by a new getitem (as the traced route makes them)."""
    x, size, dim = a["input"], a["split_size"], a["dim"]
    value = _value(x)
    if not isinstance(value, torch.Tensor) or not isinstance(size, int) or size <= 0 \
            or not isinstance(dim, int) or not _static(*value.shape) \
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
        _, index = user.args  # operator.getitem(split, index): a Python call, no schema
        user.replace_all_uses_with(items[index])
        gm.graph.erase_node(user)
    gm.graph.erase_node(node)
    return True


# op -> rewrite(gm, node, arguments by name, values) -> bool
REWRITES = {aten.conv1d.default: _convolution(1), aten.conv2d.default: _convolution(2),
            aten.conv3d.default: _convolution(3), aten.batch_norm.default: _batch_norm,
            aten.transpose.int: _transpose, aten.dropout.default: _dropout,
            aten.layer_norm.default: _layer_norm, aten.linear.default: _linear,
            aten.reshape.default: _reshape, aten.__and__.Tensor: _and,
            aten.split.Tensor: _split, aten.arange.default: _arange,
            aten.max_pool2d.default: _max_pool2d,
            aten.adaptive_avg_pool2d.default: _adaptive_avg_pool2d,
            aten.flatten.using_ints: _flatten, aten.to.dtype_layout: _to,
            aten.new_ones.default: _new_ones, aten.diff.default: _diff}
