"""Gather converters: embedding, index_select, gather, advanced indexing (index.Tensor) and
its write form index_put, nonzero, searchsorted/bucketize. TensorRT gathers take indices in
[0, n): negative ones are wrapped here where torch allows them."""

from __future__ import annotations

import torch

from ..._trt import IS_RTX, trt
from .. import dims as D
from .. import helpers
from .._trt_ops import EW, RED, UN
from ..blocks.index import broadcast_dims, gather, scatter_reduce_sum, wrap_negative_indices
from ..blocks.nodes import fake, fake_input, node_args
from ..blocks.reduce import reduce, where
from ..registry import converter

aten = torch.ops.aten
INDEX_DTYPES = (torch.int32, torch.int64)



@converter(aten.embedding.default, dynamic=True)
def embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    # padding_idx and scale_grad_by_freq only change gradients.
    return gather(ctx, helpers.itensor(ctx, weight), helpers.itensor(ctx, indices), 0)


@converter(aten.index_select.default, dynamic=True)
@D.itensor_input
def index_select(ctx, input, dim, index):
    index = helpers.itensor(ctx, index)
    if len(index.shape) == 0:
        index = D.reshape(ctx, index, [1])
    if len(input.shape) == 0:  # a 0-d input selects from itself: gather as (1,), back to 0-d
        return D.reshape(ctx, gather(ctx, D.reshape(ctx, input, [1]), index, 0), [])
    return gather(ctx, input, index, helpers.normalize_dim(dim, len(input.shape)))


def _gather_ok(node, settings):
    if fake_input(node).dim() == 0:
        return "gather of a 0-d tensor is not supported"
    return None


@converter(aten.gather.default, validator=_gather_ok, dynamic=True)
def gather_elements(ctx, input, dim, index, sparse_grad=False):
    input = helpers.itensor(ctx, input)  # a buffer (BERT's token_type_ids) is a constant
    return gather(ctx, input, helpers.itensor(ctx, index),
                  helpers.normalize_dim(dim, len(input.shape)), trt.GatherMode.ELEMENT)


# ---------------------------------------------------------------------------------------
# Advanced indexing. x[i0, i1, ...] with index tensors at dims P broadcast to one shape B;
# the result is B followed by the other dims, except that when P is one run of adjacent
# dims torch keeps B where that run was. One index is a DEFAULT gather; several are a
# GatherND over x with the indexed dims moved to the front.

def _index_ok(node, settings):
    indices = node_args(node)["indices"]
    for index in indices:
        if index is not None and fake(index).dtype not in INDEX_DTYPES:
            return f"{fake(index).dtype} index tensors (masks) have data-dependent shapes"
    if not any(i is not None for i in indices):
        return "no index tensor"
    return None


class Indexing:
    """The layout of an advanced-indexing expression over ``x`` (shared by index and
    index_put): indexed dims, broadcast index shape, and the order of the result dims."""

    def __init__(self, ctx, x, indices):
        self.rank = len(x.shape)
        self.dims = D.dims_of(ctx, x)
        self.positions = [p for p, i in enumerate(indices) if i is not None]
        self.rest = [d for d in range(self.rank) if d not in self.positions]
        wrapped = [wrap_negative_indices(ctx, indices[p], self.dims[p]) for p in self.positions]
        self.batch = broadcast_dims(ctx, [D.dims_of(ctx, i) for i in wrapped])
        self.indices = [D.broadcast_to(ctx, i, self.batch) for i in wrapped]
        first = self.positions[0]
        adjacent = self.positions == list(range(first, first + len(self.positions)))
        self.insert_at = first if adjacent else 0  # where B sits among the rest dims

    def front(self, ctx, x):
        """``x`` with the indexed dims moved to the front."""
        order = self.positions + self.rest
        return x if order == list(range(self.rank)) else helpers.permute(ctx, x, order)

    def stacked(self, ctx):
        """The index tuples: [*B, k] int64."""
        parts = [D.reshape(ctx, i, self.batch + [1]) for i in self.indices]
        if len(parts) == 1:
            return parts[0]
        layer = ctx.net.add_concatenation(parts)
        layer.axis = len(self.batch)
        return ctx.name_layer(layer, "stack").get_output(0)

    def result_order(self) -> list[int] | None:
        """Permutation from [B, rest] to torch's result order (None when identical)."""
        nb, nr, at = len(self.batch), len(self.rest), self.insert_at
        order = list(range(nb, nb + at)) + list(range(nb)) + list(range(nb + at, nb + nr))
        return None if order == list(range(nb + nr)) else order

    def result_dims(self) -> list[D.Dim]:
        rest = [self.dims[d] for d in self.rest]
        return rest[:self.insert_at] + self.batch + rest[self.insert_at:]


@converter(aten.index.Tensor, validator=_index_ok, dynamic=True)
@D.itensor_input
def index(ctx, input, indices):
    indices = list(indices)
    present = [p for p, i in enumerate(indices) if i is not None]
    if len(present) == 1:  # one index: a DEFAULT gather puts its shape at that dim
        p = present[0]
        index = wrap_negative_indices(ctx, indices[p], D.dims_of(ctx, input)[p])
        return gather(ctx, input, index, p)
    layout = Indexing(ctx, input, indices)
    out = gather(ctx, layout.front(ctx, input), layout.stacked(ctx), 0, trt.GatherMode.ND)
    order = layout.result_order()
    return helpers.permute(ctx, out, order) if order else out


def _index_put_ok(node, settings):
    args = node_args(node)
    indices, values, accumulate = args["indices"], fake(args["values"]), args["accumulate"]
    kinds = [fake(i).dtype for i in indices if i is not None]
    if kinds and all(k == torch.bool for k in kinds) and len(kinds) == 1:
        if indices[0] is None or accumulate or values.numel() != 1:
            return "a mask index is supported only as x[mask] = scalar"
        return None
    if any(k not in INDEX_DTYPES for k in kinds):
        return "mixed mask and integer index tensors are not supported"
    if accumulate and len(kinds) != 1:
        return "accumulate=True is supported with one index tensor"
    return None


@converter(aten.index_put.default, validator=_index_put_ok, dynamic=True)
@D.itensor_input
def index_put(ctx, input, indices, values, accumulate=False):
    indices = list(indices)
    values = helpers.itensor(ctx, values, helpers.dtype_of(input))
    if helpers.dtype_of(indices[0]) == torch.bool:  # x[mask] = v is where(mask, v, x)
        mask = helpers.itensor(ctx, indices[0])
        mask = D.reshape(ctx, mask, D.dims_of(ctx, mask) + [1] * (len(input.shape) -
                                                                 len(mask.shape)))
        return where(ctx, mask, D.reshape(ctx, values, []), input)
    layout = Indexing(ctx, input, indices)
    updates = D.broadcast_to(ctx, values, layout.result_dims())
    order = layout.result_order()
    if order:  # back to [B, rest]
        updates = helpers.permute(ctx, updates, [order.index(i) for i in range(len(order))])
    if accumulate:
        return _accumulate_put(ctx, input, layout, updates)
    front = layout.front(ctx, input)
    layer = ctx.net.add_scatter(front, layout.stacked(ctx), updates, trt.ScatterMode.ND)
    out = ctx.name_layer(layer, "scatter").get_output(0)
    perm = layout.positions + layout.rest
    return helpers.permute(ctx, out, [perm.index(i) for i in range(len(perm))]) \
        if perm != list(range(layout.rank)) else out


def _accumulate_put(ctx, input, layout, updates):
    """x.index_put_((i,), v, accumulate=True): duplicates add up, so a scatter cannot
    do it; it is a masked sum over the index positions (B flattened to one dim)."""
    (p,) = layout.positions
    rest = [layout.dims[d] for d in layout.rest]
    if 0 in rest or 0 in layout.indices[0].shape:  # nothing to add; and a -1 below would be
        return helpers.identity(ctx, input)  # ambiguous with a zero-size dim
    flat = D.reshape(ctx, updates, [-1] + rest)  # [m, rest]
    index = D.reshape(ctx, layout.indices[0], [-1] + [1] * len(rest))
    total = scatter_reduce_sum(ctx, index, flat, layout.dims[p], 0)  # [n, rest]
    order = [p] + layout.rest
    total = helpers.permute(ctx, total, [order.index(i) for i in range(layout.rank)])
    return helpers.elementwise(ctx, EW.SUM, input, total)


# ---------------------------------------------------------------------------------------
# Data-dependent shapes and searches.

def _nonzero_ok(node, settings):
    if IS_RTX:  # the build fails with "NonZero has no runners that implement it"
        return "the tensorrt_rtx builder has no NonZero implementation"
    return None


@converter(aten.nonzero.default, validator=_nonzero_ok, output_allocator=True, dynamic=True)
def nonzero(ctx, input):
    """INonZero gives [rank, count]; torch wants [count, rank]. The count is an unbacked
    symbol in the graph, which is why the converter must accept symbolic shapes."""
    layer = ctx.name_layer(ctx.net.add_non_zero(input, trt.int64), "nonzero")
    return helpers.permute(ctx, layer.get_output(0), [1, 0])


def _search_ok(node, settings):
    if node.kwargs.get("sorter") is not None:
        return "a sorter permutation is not supported"
    return None


def count_below(ctx, boundaries, values, right: bool, batched: bool, out_int32: bool):
    """For every value, how many boundaries are < it (right: <= it). That is torch's
    insertion point in a sorted sequence."""
    values = helpers.unsqueeze(ctx, values, -1)
    if batched:  # [..., m] boundaries per row of [..., k] values
        boundaries = helpers.unsqueeze(ctx, boundaries, -2)
    if right:
        hit = helpers.unary(ctx, UN.NOT, helpers.elementwise(ctx, EW.GREATER, boundaries,
                                                              values))
    else:
        hit = helpers.elementwise(ctx, EW.LESS, boundaries, values)
    counts = reduce(ctx, RED.SUM, helpers.cast(ctx, hit, torch.int32), [len(hit.shape) - 1],
                    False)
    return helpers.cast(ctx, counts, torch.int32 if out_int32 else torch.int64)


@converter(aten.searchsorted.Tensor, validator=_search_ok, dynamic=True)
def searchsorted(ctx, sorted_sequence, input, out_int32=False, right=False, side=None,
                 sorter=None):
    seq = helpers.itensor(ctx, sorted_sequence)
    dtype = helpers.result_type(seq, input)
    right = right or side == "right"
    return count_below(ctx, helpers.cast(ctx, seq, dtype), helpers.cast(ctx, input, dtype),
                       right, len(seq.shape) > 1, out_int32)


@converter(aten.bucketize.Tensor, dynamic=True)
def bucketize(ctx, input, boundaries, out_int32=False, right=False):
    # bucketize(right=False) counts boundaries < x, i.e. searchsorted(side="left").
    seq = helpers.itensor(ctx, boundaries)
    dtype = helpers.result_type(seq, input)
    return count_below(ctx, helpers.cast(ctx, seq, dtype), helpers.cast(ctx, input, dtype),
                       right, False, out_int32)
