"""x[-3::2] on a dynamic dim whose range reaches 1: torch clamps the start -3 + n to 0 when
n < 3 (at n = 1 the slice is x[0:1]); the peer's slice converter (impl/slice/ops.py
slice_op) adds n to a negative start without clamping it, so at n = 1 the SLICE layer
starts at -2, out of bounds (TensorRT's ISliceLayer in STRICT_BOUNDS mode: 'fails with an
error when the coordinates are out of bounds')."""

import torch
from _common import check
from torch.export import Dim


class Tail(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.slice.Tensor(x, 0, -3, None, 2)  # x[-3::2]


example = torch.arange(15, dtype=torch.float32).reshape(5, 3)
x = torch.arange(3, dtype=torch.float32).reshape(1, 3)
check(Tail(), [example], x[0:1], dynamic=[{0: Dim("n", min=1, max=7)}], run=[x])
