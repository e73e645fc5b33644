"""Conformance cases: slice, select, split, unbind, narrow, flip, repeat, roll, diagonal,
unfold, as_strided (bounds clamping, negative indices, steps, dynamic dims)."""

import torch

from ..case import ALL, Case, T

aten = torch.ops.aten
ONE = (torch.float32,)  # variants whose dtype does not matter run in fp32 only
ANY = ALL + (torch.bool,)
F32, I64 = torch.float32, torch.int64
INT64_MAX = 2**63 - 1


def slice_symbolic(x):
    return aten.slice.Tensor(x, 0, 1, x.shape[0] - 1)


def split_symbolic(x):
    return aten.split_with_sizes.default(x, [x.shape[0] - 1, 1])


def select_symbolic(x):
    return aten.select.int(x, 0, x.shape[0] - 2)


CASES = [
    Case(aten.slice.Tensor, (T((4, 6)), 1, 1, 5), dtypes=ANY),
    Case(aten.slice.Tensor, (T((4, 6)), 1, None, None, 2), name="step", dtypes=ONE),
    Case(aten.slice.Tensor, (T((4, 6)), -1, -4, -1), name="negative", dtypes=ONE),
    Case(aten.slice.Tensor, (T((4, 6)), 1, -10, 100), name="clamped", dtypes=ONE),
    Case(aten.slice.Tensor, (T((4, 6)), 1, 2, INT64_MAX), name="int64_max_end", dtypes=ONE),
    Case(aten.slice.Tensor, (T((4, 6)), 1, 1, 6, 3), name="step3", dtypes=ONE),
    Case(aten.slice.Tensor, (T((5, 3)), 0, 1, -1), name="dynamic_dim", dtypes=(F32, I64)),
    Case(aten.slice.Tensor, (T((5, 3)), 0, -3, None, 2), name="dynamic_dim_step", dtypes=ONE),
    Case(slice_symbolic, (T((5, 3)),), check_op=aten.slice.Tensor, name="symbolic", dtypes=ONE),
    Case(aten.slice_copy.Tensor, (T((4, 6)), 1, 1, 4), dtypes=(F32, I64)),
    Case(aten.narrow_copy.default, (T((4, 6)), 1, 1, 3), dtypes=(F32, I64)),
    Case(aten.narrow_copy.default, (T((4, 6)), 1, -3, 2), name="negative_start", dtypes=ONE),
    Case(aten.select.int, (T((3, 4)), 1, 2), dtypes=ANY),
    Case(aten.select.int, (T((3, 4)), -1, -1), name="negative", dtypes=ONE),
    Case(aten.select.int, (T((3, 4)), 0, -1), name="dynamic_negative", dtypes=ONE),
    Case(select_symbolic, (T((3, 4)),), check_op=aten.select.int, name="symbolic", dtypes=ONE),
    Case(aten.select_copy.int, (T((3, 4)), 0, 1), dtypes=(F32, I64), min_shape_delta=1),
    Case(aten.split_with_sizes.default, (T((4, 6)), [2, 4], 1), dtypes=ANY),
    Case(aten.split_with_sizes.default, (T((4, 6)), [1, 0, 5], 1), name="with_empty", dtypes=ONE),
    Case(split_symbolic, (T((4, 6)),), check_op=aten.split_with_sizes.default,
         name="symbolic", dtypes=ONE),
    Case(aten.split_copy.Tensor, (T((3, 5)), 2, 1), dtypes=(F32, I64)),
    Case(aten.unbind_copy.int, (T((3, 4)), 1), dtypes=(F32, I64)),
    Case(aten.flip.default, (T((2, 3, 4)), [0, -1]), dtypes=ANY),
    Case(aten.flip.default, (T((3, 4)), [1]), name="static_dim", dtypes=ONE),
    Case(aten.repeat.default, (T((2, 3)), [2, 3]), dtypes=ANY),
    Case(aten.repeat.default, (T((2, 3)), [2, 1, 2]), name="new_dims", dtypes=ONE),
    Case(aten.roll.default, (T((3, 4)), [1], [1]), dtypes=ANY),
    Case(aten.roll.default, (T((3, 4)), [-5, 2], [0, -1]), name="two_dims", dtypes=ONE),
    Case(aten.roll.default, (T((3, 4)), [5]), name="flattened", dtypes=ONE),
    Case(aten.diagonal.default, (T((3, 4)),), dtypes=ANY, dynamic=False),
    Case(aten.diagonal.default, (T((3, 4)), 1), name="offset", dtypes=ONE, dynamic=False),
    Case(aten.diagonal.default, (T((3, 4)), -2), name="negative_offset", dtypes=ONE,
         dynamic=False),
    Case(aten.diagonal.default, (T((2, 3, 4)), 0, 1, -1), name="batched", dtypes=ONE),
    Case(aten.unfold.default, (T((2, 7)), 1, 3, 2), dtypes=ANY),
    Case(aten.as_strided.default, (T((4, 4)), [2, 3], [4, 1], 1), dynamic=False, dtypes=ANY),
    Case(aten.as_strided_copy.default, (T((4, 4)), [2, 2], [1, 4]), dynamic=False),
]
