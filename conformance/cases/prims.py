"""Conformance cases: the prims ops Torch-TensorRT converts (sum, div, broadcast_in_dim)."""

import torch

from ..case import ALL, INTS, Case, T

prims = torch.ops.prims


def broadcast_batch(x):
    return prims.broadcast_in_dim.default(x, [4, x.shape[0], x.shape[1]], [1, 2])


def broadcast_middle(x):
    return prims.broadcast_in_dim.default(x, [x.shape[0], 5], [0])


CASES = [
    Case(prims.sum.default, (T((3, 4)), [0]), dtypes=ALL,
         xfail={torch.int32: "torch disagrees with itself: prims.sum's meta keeps int32 (prims "
                             "do not promote), its eager kernel (aten.sum) returns int64; the "
                             "engine follows the graph's int32"}),
    Case(prims.sum.default, (T((2, 3, 4)), [0, 2]), name="two_dims"),
    Case(prims.sum.default, (T((2, 3)), []), name="empty_dims_sums_all"),
    Case(prims.div.default, (T((2, 3)), T((2, 3), low=0.5))),
    Case(prims.div.default, (T((2, 3), low=-9, high=9), T((2, 3), low=1, high=4)),
         name="int_truncates", dtypes=INTS),
    Case(prims.div.default, (T((4,), values=[7, -7, 7, -7]), T((4,), values=[2, 2, -2, -2])),
         name="int_signs", dtypes=INTS),
    Case(broadcast_batch, (T((2, 3)),), check_op=prims.broadcast_in_dim.default, dtypes=ALL),
    Case(broadcast_middle, (T((3,)),), check_op=prims.broadcast_in_dim.default,
         name="middle"),
]
