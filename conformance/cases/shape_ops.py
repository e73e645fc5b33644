"""Conformance cases: views, layout and dtype copies, concatenation. Ops taking tensor
lists or SymInt sizes are wrapped in small functions (``check_op`` names the ATen op)."""

import torch

from ..case import ALL, INTS, Case, T, W

aten = torch.ops.aten
ONE = (torch.float32,)  # variants whose dtype does not matter run in fp32 only
ANY = ALL + (torch.bool,)
F32, F16, BF16, BOOL = torch.float32, torch.float16, torch.bfloat16, torch.bool


def view_symbolic(x):
    return aten.view.default(x, [x.shape[0] * x.shape[1], -1])


def view_symbolic_inner(x):
    return aten.view.default(x, [2, x.shape[1] * 4])


def expand_like(x, y):
    return aten.expand.default(x, list(y.shape))


def cat_list(*tensors, dim=0):
    return aten.cat.default(list(tensors), dim)


# Note [resize]: ``resize_`` on a fresh copy; functionalization makes it ``aten.resize``.
def resize_flat(x):
    return aten.resize_.default(x.clone(), [x.shape[0] * x.shape[1]])


def resize_shrink(x):
    return aten.resize_.default(x.clone(), [x.shape[0], 2])


RESIZE_REASON = ("functionalization turns resize_ into aten.resize before conversion; the "
                 "resize_ converter serves graphs that keep the in-place op")


CASES = [
    Case(aten.view.default, (T((2, 3, 4)), [-1, 4]), dtypes=ANY),
    Case(aten.view.default, (T((2, 3, 4)), [-1]), name="flatten", dtypes=ONE),
    Case(aten.view.default, (T((1,)), []), name="to_scalar", dtypes=ONE, dynamic=False),
    Case(view_symbolic, (T((2, 3, 4)),), check_op=aten.view.default, name="symbolic", dtypes=ONE),
    Case(view_symbolic_inner, (T((2, 3, 4), dynamic=(1,)),), check_op=aten.view.default,
         name="symbolic_inner", dtypes=ONE),
    Case(aten.view_copy.default, (T((2, 3, 4)), [-1, 12]), dtypes=(F32, torch.int64)),
    Case(aten._reshape_copy.default, (T((2, 3, 4)), [-1, 2, 2]), dtypes=(F32, torch.int32)),
    Case(aten.permute.default, (T((2, 3, 4)), [2, 0, 1]), dtypes=ANY),
    Case(aten.permute.default, (T((2, 3, 4)), [-1, 0, -2]), name="negative", dtypes=ONE),
    Case(aten.permute_copy.default, (T((2, 3, 4)), [1, 0, 2]), dtypes=(F32, torch.int64)),
    Case(aten.expand.default, (T((3, 1)), [2, -1, 4]), dtypes=ANY),
    Case(aten.expand.default, (T(()), [2, 3]), name="scalar", dtypes=ONE),
    Case(expand_like, (T((1, 4)), T((3, 4))), check_op=aten.expand.default,
         name="symbolic", dtypes=ONE),
    Case(aten.squeeze.dims, (T((3, 1, 4, 1)), [1, -1]), dtypes=ANY),
    Case(aten.squeeze.dims, (T((3, 1, 4)), [0, 1]), name="non_unit_ignored", dtypes=ONE,
         min_shape_delta=1),
    # Squeezing a dynamic dim whose range includes 1: eager drops the dim at size 1, but a
    # graph has one rank; export (size-oblivious, Note [Tracing dynamic dims]) keeps it.
    Case(aten.squeeze.dims, (T((3, 1, 4)), [0, 1]), name="dynamic_dim_reaching_1",
         dtypes=ONE, xfail={"dynamic": "squeeze of a dynamic dim whose range includes 1: "
                                       "rank depends on the run-time size (one graph, one "
                                       "rank); eager gives (4,) at size 1, the compile (1, 4)"}),
    Case(aten.unsqueeze.default, (T((2, 3)), 0), dtypes=ANY),
    Case(aten.unsqueeze.default, (T((2, 3)), -1), name="last", dtypes=ONE),
    Case(aten.unsqueeze.default, (T((2, 3)), 1), name="middle", dtypes=ONE),
    Case(aten.clone.default, (T((2, 3)),), dtypes=ANY),
    Case(aten.clone.default, (T((2, 3, 4, 5)),), {"memory_format": torch.channels_last},
         name="channels_last", dtypes=ONE),
    # torch's channel_shuffle kernel specializes every size at export: static cells only.
    Case(aten.native_channel_shuffle.default, (T((2, 6, 3, 2)), 3), dtypes=ANY,
         dynamic=False),
    Case(aten.native_channel_shuffle.default, (T((2, 4, 5)), 2), dynamic=False,
         name="3d", dtypes=ONE),
    Case(aten._to_copy.default, (T((2, 3)),), {"dtype": F16}, dtypes=(F32, BF16) + INTS + (BOOL,),
         name="to_fp16"),
    Case(aten._to_copy.default, (T((2, 3)),), {"dtype": F32}, dtypes=(F16, BF16) + INTS + (BOOL,),
         name="to_fp32"),
    Case(aten._to_copy.default, (T((2, 3)),), {"dtype": BF16}, dtypes=(F32, F16, torch.int32),
         name="to_bf16"),
    Case(aten._to_copy.default, (T((2, 3), low=-3, high=3),), {"dtype": torch.int32},
         dtypes=(F32, F16, BF16, torch.int64, BOOL), name="to_int32"),
    Case(aten._to_copy.default, (T((2, 3)),), {"dtype": torch.int64},
         dtypes=(F32, torch.int32, BOOL), name="to_int64"),
    Case(aten._to_copy.default, (T((2, 3)),), {"dtype": BOOL}, dtypes=ALL, name="to_bool"),
    Case(aten._to_copy.default, (T((5,), values=[0.0, -0.0, 0.5, -1.5, 2.9]),), {"dtype": BOOL},
         dtypes=(F32,), name="to_bool_edges"),
    Case(aten.copy.default, (T((2, 3)), T((3,), dynamic=())), dtypes=ALL),
    Case(aten.copy.default, (T((2, 3)), T((2, 3), dtype=torch.int32)), name="cast", dtypes=ONE),
    Case(cat_list, (T((2, 3)), T((4, 3))), check_op=aten.cat.default, dtypes=ANY),
    Case(cat_list, (T((2, 3)), T((2, 5)), T((2, 1))), {"dim": -1},
         check_op=aten.cat.default, name="negative_dim", dtypes=ONE),
    Case(cat_list, (T((2, 3)), T((2, 3), dtype=torch.int32)), {"dim": 1},
         check_op=aten.cat.default, name="promotion", dtypes=ONE),
    Case(cat_list, (T((2, 3)), T((2, 0))), {"dim": 1}, check_op=aten.cat.default,
         name="empty", dtypes=ONE),
    Case(cat_list, (T((2, 3)), T((0,))), check_op=aten.cat.default, name="legacy_empty_1d",
         dtypes=ONE),
    Case(cat_list, (T((2, 3)), W((1, 3))), check_op=aten.cat.default, name="weight", dtypes=ONE),
    Case(resize_flat, (T((3, 4)),), check_op=aten.resize.default, dtypes=ANY),
    Case(resize_shrink, (T((3, 4)),), check_op=aten.resize.default, name="shrink"),
    Case(resize_flat, (T((3, 4)),), check_op=aten.resize_.default, dtypes=ONE, dynamic=False,
         name="in_place", xfail={F32: RESIZE_REASON}),
]
