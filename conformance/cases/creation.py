"""Conformance cases: tensor creation (full, full_like, empty family, arange, scalar_tensor,
tril/triu_indices). Wrappers take sizes and dtype from a model input so that the dynamic
variant passes SymInt sizes and every dtype cell really changes the output dtype."""

import torch

from ..case import ALL, Case, T

aten = torch.ops.aten
ONE = (torch.float32,)  # variants whose dtype does not matter run in fp32 only
ANY = ALL + (torch.bool,)
F32, I32, I64 = torch.float32, torch.int32, torch.int64


def full_sized(x, value):
    return aten.full.default([x.shape[0], 3], value, dtype=x.dtype)


def scalar_of(x, value):
    return aten.scalar_tensor.default(value, dtype=x.dtype)


def scalar_of_size(x):
    return aten.scalar_tensor.default(x.shape[0] * 2, dtype=x.dtype)


def arange_to_size(x):
    return aten.arange.start_step(0, x.shape[0], dtype=x.dtype)


def arange_between(x):
    return aten.arange.start_step(x.shape[0], 3 * x.shape[0] + 1, 3)


def arange_down(x):
    return aten.arange.start_step(x.shape[0], -2, -2)


# Note [Empty tensors]: empty's values are uninitialized in torch, so the cases compare
# only its shape and dtype: full_like(empty, 7) keeps empty in the converted graph and
# produces values that are independent of the uninitialized memory.
def empty_shape(x):
    return aten.full_like.default(aten.empty.memory_format([x.shape[0], 2], dtype=x.dtype), 7)


def empty_permuted_shape(x):
    out = aten.empty_permuted.default([x.shape[0], 2, 3], [0, 2, 1], dtype=x.dtype)
    return aten.full_like.default(out, 7)


def empty_strided_shape(x):
    out = aten.empty_strided.default([x.shape[0], 2], [2, 1], dtype=x.dtype)
    return aten.full_like.default(out, 7)


def new_empty_strided_shape(x):
    return aten.full_like.default(aten.new_empty_strided.default(x, [3, 2], [2, 1]), 7)


CASES = [
    Case(full_sized, (T((4, 2)), 1.5), check_op=aten.full.default, dtypes=ANY),
    Case(full_sized, (T((4, 2)), -3), check_op=aten.full.default, dtypes=ALL, name="int"),
    Case(aten.full.default, ([2, 3], 2), {"dtype": torch.bool}, dtypes=(F32,), name="bool"),
    Case(aten.full.default, ([], 0.25), dtypes=(F32,), name="scalar"),
    Case(aten.full_like.default, (T((2, 3)), 1.5), dtypes=ANY),
    Case(aten.full_like.default, (T((2, 3)), 0), {"dtype": I32}, name="dtype", dtypes=ONE),
    Case(aten.full_like.default, (T((2, 3)), float("inf")), name="inf", dtypes=ONE),
    Case(aten.scalar_tensor.default, (2.5,), dtypes=(F32,)),
    Case(scalar_of, (T((2,)), 3), check_op=aten.scalar_tensor.default, dtypes=ANY,
         name="dtype"),
    Case(scalar_of_size, (T((3, 2)),), check_op=aten.scalar_tensor.default, dtypes=ALL,
         name="symbolic"),
    Case(aten.arange.start_step, (0, 5), dtypes=(F32,)),
    Case(aten.arange.start_step, (1, 9, 2), {"dtype": F32}, dtypes=(F32,), name="step"),
    Case(aten.arange.start_step, (0.0, 1.0, 0.25), dtypes=(F32,), name="float"),
    Case(aten.arange.start_step, (5, -3, -3), dtypes=(F32,), name="negative_step"),
    Case(arange_to_size, (T((5, 2)),), check_op=aten.arange.start_step, dtypes=ALL,
         name="symbolic"),
    Case(arange_between, (T((5, 2)),), check_op=aten.arange.start_step, dtypes=(F32,),
         name="symbolic_start"),
    Case(arange_down, (T((5, 2)),), check_op=aten.arange.start_step, dtypes=(F32,),
         name="symbolic_negative_step"),
    Case(empty_shape, (T((4, 2)),), check_op=aten.empty.memory_format, dtypes=ANY),
    Case(empty_permuted_shape, (T((4, 2)),), check_op=aten.empty_permuted.default,
         dtypes=ALL),
    Case(empty_strided_shape, (T((4, 2)),), check_op=aten.empty_strided.default, dtypes=ALL),
    Case(new_empty_strided_shape, (T((4, 2)),), check_op=aten.new_empty_strided.default,
         dtypes=ALL),
    Case(aten.tril_indices.default, (3, 4), dtypes=(F32,)),
    Case(aten.tril_indices.default, (4, 3, -1), {"dtype": I32}, dtypes=(F32,), name="offset"),
    Case(aten.triu_indices.default, (3, 4, 1), dtypes=(F32,)),
]
