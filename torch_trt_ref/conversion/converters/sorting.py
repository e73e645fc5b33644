"""Order-statistics converters: topk, sort, kthvalue and median on ITopKLayer (one of the
last four dims, k <= 3840, int64 indices), and stable sort by rank counting."""

from __future__ import annotations

import torch

from ..._trt import trt
from .. import dims as D
from .. import helpers
from .._trt_ops import EW, RED
from ..blocks.index import MAX_K, topk_layer
from ..blocks.nodes import fake_input, node_args
from ..blocks.reduce import positions, reduce
from ..registry import converter

aten = torch.ops.aten
TOPK_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64)


def _sort_ok(node, dim, k=None, static: bool = False):
    """Why TopK cannot serve this node (None if it can). ``dim=None`` means the input is
    flattened first; ``k=None`` means the whole dim; ``static`` requires a static size."""
    x = fake_input(node)
    if x.dtype not in TOPK_DTYPES:
        return f"TopK does not take {x.dtype}"
    if dim is None:
        size = x.numel()
    elif x.dim() == 0:
        return "TopK needs a tensor of rank >= 1"
    elif dim % x.dim() < x.dim() - 4:
        return "TopK reduces one of the last four dims only"
    else:
        size = x.shape[dim]
    if static and not isinstance(size, int):
        return "the reduced dim must have a static size"
    k = size if k is None else k
    if isinstance(k, int) and k > MAX_K:
        return f"TopK supports k <= {MAX_K}"
    return None


@converter(aten.topk.default, dynamic=True,
           validator=lambda n, s: _sort_ok(n, node_args(n)["dim"], node_args(n)["k"]))
def topk(ctx, input, k, dim=-1, largest=True, sorted=True):
    # sorted=False lets torch return any order; the sorted order is one of them.
    return topk_layer(ctx, input, k, helpers.normalize_dim(dim, len(input.shape)), largest)


@converter(aten.sort.default, dynamic=True,
           validator=lambda n, s: _sort_ok(n, node_args(n)["dim"]))
def sort(ctx, input, dim=-1, descending=False):
    dim = helpers.normalize_dim(dim, len(input.shape))
    return topk_layer(ctx, input, D.dims_of(ctx, input)[dim], dim, descending)


def _kth_smallest(ctx, x, k: int, dim: int, keepdim: bool):
    """The k-th smallest (1-based) along ``dim`` and its index."""
    values, indices = topk_layer(ctx, x, k, dim, largest=False)
    sizes = D.dims_of(ctx, values)
    rank = len(sizes)
    start = [0] * rank
    start[dim], sizes[dim] = k - 1, 1
    out = [D.slice_nd(ctx, t, start, sizes, [1] * rank) for t in (values, indices)]
    if not keepdim:
        squeezed = sizes[:dim] + sizes[dim + 1:]
        out = [D.reshape(ctx, t, squeezed) for t in out]
    return tuple(out)


@converter(aten.kthvalue.default, dynamic=True,
           validator=lambda n, s: _sort_ok(n, node_args(n)["dim"], node_args(n)["k"]))
def kthvalue(ctx, input, k, dim=-1, keepdim=False):
    return _kth_smallest(ctx, input, k, helpers.normalize_dim(dim, len(input.shape)), keepdim)


@converter(aten.median.dim, dynamic=True,
           validator=lambda n, s: _sort_ok(n, node_args(n)["dim"], None, True))
def median_dim(ctx, input, dim, keepdim=False):
    # torch's median is the lower median: the ((n - 1) // 2 + 1)-th smallest.
    dim = helpers.normalize_dim(dim, len(input.shape))
    return _kth_smallest(ctx, input, (input.shape[dim] - 1) // 2 + 1, dim, keepdim)


@converter(aten.median.default, validator=lambda n, s: _sort_ok(n, None, None, True))
def median(ctx, input):
    flat = D.reshape(ctx, input, [-1])
    return _kth_smallest(ctx, flat, (flat.shape[0] - 1) // 2 + 1, 0, False)[0]


def _stable_ok(node, settings):
    x = fake_input(node)
    if x.dtype == torch.bool:
        return "bool inputs are not supported"
    if x.dim() == 0:
        return "sort of a 0-d tensor is not supported"
    return None


@converter(aten.sort.stable, validator=_stable_ok, dynamic=True)
def sort_stable(ctx, input, stable=None, dim=-1, descending=False):
    """A stable sort by counting: element i goes to rank #{j: x_j before x_i in the order}
    + #{j < i: x_j == x_i}, then values and positions are scattered to their ranks. It
    compares all pairs along ``dim`` (n^2 memory per row); NaNs are not ordered."""
    rank = len(input.shape)
    dim = helpers.normalize_dim(dim, rank)
    mine = helpers.unsqueeze(ctx, input, dim + 1)  # [.., i, 1, ..]
    other = helpers.unsqueeze(ctx, input, dim)  # [.., 1, j, ..]
    ahead = helpers.elementwise(ctx, EW.GREATER if descending else EW.LESS, other, mine)
    index = positions(ctx, input, dim)
    earlier = helpers.elementwise(ctx, EW.LESS, helpers.unsqueeze(ctx, index, dim),
                                  helpers.unsqueeze(ctx, index, dim + 1))
    tie = helpers.elementwise(ctx, EW.AND, helpers.elementwise(ctx, EW.EQUAL, other, mine),
                              earlier)
    before = helpers.cast(ctx, helpers.elementwise(ctx, EW.OR, ahead, tie), torch.int32)
    ranks = helpers.cast(ctx, reduce(ctx, RED.SUM, before, [dim + 1], False), torch.int64)
    sizes = D.dims_of(ctx, input)
    return (scatter_to(ctx, input, ranks, input, dim),
            scatter_to(ctx, D.broadcast_to(ctx, index, sizes), ranks,
                       D.broadcast_to(ctx, index, sizes), dim))


def scatter_to(ctx, data, index, updates, dim: int):
    """``data`` with data[.., index[k], ..] = updates[k] along ``dim`` (ELEMENT scatter)."""
    layer = ctx.net.add_scatter(data, index, updates, trt.ScatterMode.ELEMENT)
    layer.axis = dim
    return ctx.name_layer(layer, "scatter").get_output(0)
