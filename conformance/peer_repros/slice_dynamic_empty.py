"""x[1:-1] on a dynamic dim whose range reaches 1: torch returns an empty slice (size 0)
there; the peer's slice converter (impl/slice/ops.py slice_op) computes the size as
(n - 1) - 1 without clamping at 0, so at n = 1 the SLICE layer gets size -1: a negative
output dim, which no TensorRT tensor can have."""

import torch
from _common import check
from torch.export import Dim


class Inner(torch.nn.Module):
    def forward(self, x):
        return x[1:-1]


example = torch.arange(15, dtype=torch.float32).reshape(5, 3)
x = torch.arange(3, dtype=torch.float32).reshape(1, 3)
check(Inner(), [example], torch.zeros(0, 3), dynamic=[{0: Dim("n", min=1, max=7)}], run=[x])
