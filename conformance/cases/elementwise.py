"""Conformance cases: binary elementwise ops."""

import torch

from ..case import ALL, Case, T

aten = torch.ops.aten

CASES = [
    Case(aten.add.Tensor, (T((2, 3)), T((2, 3))), dtypes=ALL),
    Case(aten.add.Tensor, (T((4, 1, 3)), T((5, 1))), name="broadcast"),
    Case(aten.add.Tensor, (T((2, 3)), T((2, 3))), {"alpha": 2}, name="alpha"),
]
