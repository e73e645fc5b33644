"""Conformance cases: cumsum (ICumulativeLayer) and the log-step scans (cumprod,
logcumsumexp, cummax/cummin), which need a static scanned dim."""

import torch

from ..case import ALL, Case, T

aten = torch.ops.aten
F32 = (torch.float32,)
WIDE = {"low": -1000, "high": 1000}

CASES = [
    # int cumsum accumulates in int64, bool counts
    Case(aten.cumsum.default, (T((3, 4)), 1), dtypes=ALL + (torch.bool,)),
    Case(aten.cumsum.default, (T((4, 3)), 0), dtypes=F32, name="dim0"),
    Case(aten.cumsum.default, (T((2, 3)), -1), {"dtype": torch.float32}, name="dtype",
         dtypes=(torch.int32, torch.float16)),
    Case(aten.cumprod.default, (T((3, 5), low=0.5, high=1.5), 1), dtypes=ALL),
    Case(aten.cumprod.default, (T((6, 3), low=0.5, high=1.5, dynamic=(1,)), 0),
         dtypes=F32, name="dim0"),
    Case(aten.logcumsumexp.default, (T((3, 5)), 1)),
    Case(aten.logcumsumexp.default, (T((7, 2), low=-30, high=30, dynamic=(1,)), 0),
         name="wide_dim0"),
    # small int ranges make ties: torch reports the last index of the running extreme
    Case(aten.cummax.default, (T((3, 6)), 1), dtypes=ALL),
    Case(aten.cummax.default, (T((5, 2), **WIDE, dynamic=(1,)), 0), dtypes=F32, name="dim0"),
    Case(aten.cummin.default, (T((3, 6)), -1), dtypes=ALL),
]
