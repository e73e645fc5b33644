"""x[-n + 1:] with n = x.shape[0] dynamic (x[1:] written with a negative, symbolic start):
torch adds n to the negative start (1 - n + n = 1); the peer's slice converter
(impl/slice/ops.py slice_op) passes a start that is a tensor (a symbolic size) to the SLICE
layer as it is, so at n = 6 it starts at -5, out of bounds (TensorRT's ISliceLayer in
STRICT_BOUNDS mode: 'fails with an error when the coordinates are out of bounds')."""

import torch
from _common import check
from torch.export import Dim


class LastRows(torch.nn.Module):
    def forward(self, x):
        return x[-x.shape[0] + 1:]


x = torch.arange(12, dtype=torch.float32).reshape(6, 2)
check(LastRows(), [x], x[1:], dynamic=[{0: Dim("n", min=1, max=8)}])
