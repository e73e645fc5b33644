"""Conformance cases: embedding, index_select, gather, index, index_put, the scatter family,
index_reduce, masked_scatter, slice_scatter, nonzero, searchsorted. Index tensors stay in the
smallest dynamic size; scatters that replace use duplicate-free (weight) indices."""

import torch

from ..case import ALL, FLOATS, INTS, Case, T, W

aten = torch.ops.aten
F32 = (torch.float32,)
I64, I32, BOOL = torch.int64, torch.int32, torch.bool


def idx(shape, high, low=0, dtype=I64, **kw):
    return T(shape, dtype=dtype, low=low, high=high, **kw)


def index_at(x, *indices, at=(0,)):
    """x[..., i, ..., j, ...]: index tensors at dims ``at``, None elsewhere."""
    full = [None] * (max(at) + 1)
    for p, i in zip(at, indices):
        full[p] = i
    return aten.index.Tensor(x, full)


def index_put_at(x, values, *indices, at=(0,), accumulate=False):
    full = [None] * (max(at) + 1)
    for p, i in zip(at, indices):
        full[p] = i
    return aten.index_put.default(x, full, values, accumulate)


IX, PUT = aten.index.Tensor, aten.index_put.default
SORTED = [-1.5, -0.5, 0.0, 0.5, 1.5]
NO_NONZERO = "tensorrt_rtx builds have no NonZero kernel; the converter rejects it there"

CASES = [
    Case(aten.embedding.default, (W((10, 4)), idx((2, 3), 9)), dtypes=ALL),
    Case(aten.embedding.default, (T((10, 4), dynamic=(1,)), idx((5,), 9, dtype=I32)),
         dtypes=F32, name="int32_indices"),
    Case(aten.index_select.default, (T((3, 5)), 1, idx((4,), 4)), dtypes=ALL),
    Case(aten.index_select.default, (T((5, 3), dynamic=(1,)), 0,
                                     W((2,), dtype=I64, values=[4, 1])),
         dtypes=F32, name="weight_index"),
    Case(aten.index_select.default, (W((5, 3)), 0, idx((4,), 4)), dtypes=F32,
         name="weight_input"),
    Case(aten.gather.default, (T((3, 5)), 1, idx((3, 4), 4)), dtypes=ALL),
    Case(aten.gather.default, (T((4, 3)), -2, idx((4, 3), 2)), dtypes=F32, name="dim0",
         min_shape_delta=1),
    Case(aten.gather.default, (T((3, 5), dynamic=(1,)), 1, idx((2, 2), 3, dynamic=())),
         dtypes=F32, name="smaller_index", min_shape_delta=1),
    # advanced indexing: one index (negative entries wrap), adjacent, split and broadcast
    Case(index_at, (T((5, 3), dynamic=(1,)), idx((4,), 4, low=-5)), check_op=IX, dtypes=ALL),
    Case(index_at, (T((3, 5)), idx((2, 2), 4, dtype=I32)), {"at": (1,)}, check_op=IX,
         dtypes=F32, name="dim1_2d_index"),
    Case(index_at, (T((4, 5, 3), dynamic=(2,)), idx((2,), 3), idx((2,), 4)),
         {"at": (0, 1)}, check_op=IX, dtypes=F32, name="adjacent_front"),
    Case(index_at, (T((3, 4, 5)), idx((2,), 3, dynamic=()), idx((2,), 4, dynamic=())),
         {"at": (1, 2)}, check_op=IX, dtypes=F32, name="adjacent_inner"),
    Case(index_at, (T((4, 3, 5), dynamic=(1,)), idx((2,), 3), idx((2,), 4, low=-5)),
         {"at": (0, 2)}, check_op=IX, dtypes=F32, name="split"),
    Case(index_at, (W((6, 3)), idx((4,), 5)), check_op=IX, dtypes=F32, name="weight_input"),
    # GPT-2's position lookup: x[i0, i1] with broadcasting index tensors
    Case(index_at, (T((2, 6), dynamic=()), idx((1, 1, 1), 1, dynamic=()),
                    idx((1, 4, 1), 5, dynamic=(1,))), {"at": (0, 1)}, check_op=IX,
         name="broadcast"),
    Case(index_at, (T((3, 4)), T((3,), dtype=BOOL)), check_op=IX, name="mask",
         dtypes=(torch.float32,), dynamic=False,
         xfail={torch.float32: "a mask index has a data-dependent shape: rejected"}),
    # index_put: replace (no duplicates), broadcast values, accumulate (duplicates add up)
    Case(index_put_at, (T((5, 3), dynamic=(1,)), T((2, 3), dynamic=(1,)),
                        T((2,), dtype=I64, values=[4, -5])), check_op=PUT, dtypes=ALL),
    Case(index_put_at, (T((3, 4)), T(()), W((2,), dtype=I64, values=[3, 1])), {"at": (1,)},
         check_op=PUT, dtypes=F32, name="scalar_value"),
    Case(index_put_at, (T((4, 5, 2), dynamic=(2,)), T((3, 2), dynamic=(1,)),
                        W((3,), dtype=I64, values=[0, 3, 3]), W((3,), dtype=I64,
                                                                values=[1, 1, 4])),
         {"at": (0, 1)}, check_op=PUT, dtypes=F32, name="two_indices"),
    Case(index_put_at, (T((5, 3), dynamic=(1,)), T((4, 3), dynamic=(1,)),
                        W((4,), dtype=I64, values=[0, 2, 0, -1])), {"accumulate": True},
         check_op=PUT, name="accumulate", dtypes=FLOATS + INTS),
    Case(index_put_at, (T((3, 4)), W(()), T((3, 4), dtype=BOOL)), check_op=PUT,
         name="mask_scalar", dtypes=ALL),
    # scatter: replacing kinds need duplicate-free indices
    Case(aten.scatter.src, (T((3, 5), dynamic=(1,)), 1,
                            W((3, 2), dtype=I64, values=[[0, 3], [1, 2], [2, 0]]),
                            T((3, 2), dynamic=())), dtypes=ALL),
    Case(aten.scatter.value, (T((3, 5), dynamic=(1,)), 1,
                              W((3, 2), dtype=I64, values=[[0, 3], [1, 2], [2, 0]]), 2.5)),
    Case(aten.scatter.value, (T((4, 3)), 0,
                              W((2, 3), dtype=I64, values=[[0, 1, 2], [2, 0, 1]]), -1),
         name="dim0", dtypes=INTS, min_shape_delta=1),  # indices reach row 2
    Case(aten.scatter_add.default, (T((3, 4)), 1, idx((3, 4), 3), T((3, 4))), dtypes=ALL),
    Case(aten.scatter_add.default, (T((4, 3), dynamic=(1,)), 0, idx((4, 3), 3, dynamic=(1,)),
                                    T((4, 3), dynamic=(1,))), dtypes=F32, name="dim0"),
    *[Case(aten.scatter_reduce.two, (T((3, 4)), 1, idx((3, 4), 3), T((3, 4)), r),
           dtypes=(torch.float32, torch.int32) if r != "mean" else FLOATS, name=r)
      for r in ("sum", "prod", "amax", "amin", "mean")],
    *[Case(aten.scatter_reduce.two, (T((3, 4), dynamic=(1,)), 0,
                                     idx((3, 4), 2, dynamic=(1,)), T((3, 4), dynamic=(1,)), r),
           {"include_self": False}, dtypes=(torch.float32,), name=f"{r}_exclude_self")
      for r in ("sum", "prod", "amax", "amin", "mean")],
    Case(aten.scatter.reduce, (T((3, 4)), 1, idx((3, 4), 3), T((3, 4))), {"reduce": "add"},
         dtypes=(torch.float32, torch.int64)),
    Case(aten.scatter.reduce, (T((3, 4)), 0, idx((3, 4), 2), T((3, 4))),
         {"reduce": "multiply"}, name="multiply", dynamic=False),
    Case(aten.scatter.value_reduce, (T((3, 4)), 1, idx((3, 4), 3), 1.5), {"reduce": "add"}),
    *[Case(aten.index_reduce.default, (T((5, 3), dynamic=(1,)), 0, W((4,), dtype=I64,
                                                                     values=[0, 2, 0, 4]),
                                       T((4, 3), dynamic=(1,)), r),
           dtypes=(torch.float32, torch.int32) if r != "mean" else FLOATS, name=r)
      for r in ("prod", "mean", "amax", "amin")],
    Case(aten.index_reduce.default, (T((3, 4)), 1, W((3,), dtype=I64, values=[3, 3, 1]),
                                     T((3, 3)), "amax"), {"include_self": False},
         name="exclude_self"),
    Case(aten.masked_scatter.default, (T((3, 4)), T((3, 4), dtype=BOOL), T((12,))),
         dtypes=ALL, min_shape_delta=1),  # the source must hold every selected element
    Case(aten.masked_scatter.default, (T((3, 4), dynamic=(1,)), T((4,), dtype=BOOL),
                                       T((5, 4), dynamic=(1,))), dtypes=F32, name="broadcast_mask"),
    Case(aten.slice_scatter.default, (T((4, 6)), T((4, 2)), 1, 1, 5, 2), dtypes=ALL),
    Case(aten.slice_scatter.default, (T((6, 3), dynamic=(1,)), T((2, 3), dynamic=(1,)), 0,
                                      -2), dtypes=F32, name="negative_start"),
    # nonzero: the row count depends on the data (output allocator)
    Case(aten.nonzero.default, (T((3, 4)),), dtypes=(BOOL, torch.float32, I32),
         dynamic=False, xfail={d: NO_NONZERO for d in (BOOL, torch.float32, I32)}),
    Case(aten.searchsorted.Tensor, (W((5,), values=SORTED), T((3, 4))),
         dtypes=(torch.float32, torch.float16, I64)),
    Case(aten.searchsorted.Tensor, (W((5,), values=SORTED), T((3, 4))), {"right": True},
         dtypes=F32, name="right"),
    Case(aten.searchsorted.Tensor, (W((2, 3), values=[[-1, 0, 1], [-2, 0.5, 2]]),
                                    T((2, 4), dynamic=(1,))), {"out_int32": True},
         dtypes=F32, name="batched"),
    Case(aten.bucketize.Tensor, (T((3, 4)), W((5,), values=SORTED)),
         dtypes=(torch.float32, I32)),
    Case(aten.bucketize.Tensor, (T((3, 4)), W((5,), values=SORTED)), {"right": True},
         dtypes=F32, name="right"),
]
