"""Conformance cases: topk, sort, kthvalue and median (ITopKLayer). Integer samples use a
wide range so that ties, whose index order TensorRT leaves unspecified, do not occur."""

import torch

from ..case import ALL, Case, T

aten = torch.ops.aten
F32 = (torch.float32,)
WIDE = {"low": -1000, "high": 1000}

CASES = [
    Case(aten.topk.default, (T((3, 6), **WIDE), 2), dtypes=ALL),
    Case(aten.topk.default, (T((4, 3, 2), **WIDE), 2, 0, False), dtypes=F32, name="smallest_dim0",
         min_shape_delta=1),
    Case(aten.sort.default, (T((3, 6), **WIDE),), dtypes=ALL),
    Case(aten.sort.default, (T((5, 3), **WIDE), 0, True), name="descending_dim0"),
    # stable sort: small int ranges make ties, which keep their input order
    Case(aten.sort.stable, (T((3, 6)),), {"stable": True}, dtypes=ALL),
    Case(aten.sort.stable, (T((5, 3)),), {"stable": True, "dim": 0, "descending": True},
         name="descending_dim0", dtypes=ALL),
    Case(aten.kthvalue.default, (T((3, 6), **WIDE), 2), dtypes=ALL),
    Case(aten.kthvalue.default, (T((4, 3), **WIDE), 3, 0, True), dtypes=F32, name="dim0_keepdim",
         min_shape_delta=1),
    Case(aten.median.dim, (T((3, 6), **WIDE), 1), dtypes=ALL),
    Case(aten.median.dim, (T((5, 3), **WIDE, dynamic=(1,)), 0, True),
         dtypes=F32, name="odd_keepdim"),
    Case(aten.median.default, (T((3, 4), **WIDE),), dtypes=ALL, dynamic=False),
]
