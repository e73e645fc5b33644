"""x * (x.shape[0] / 4) on a dynamic batch: Python's true division of a size is a float
(torch.export records operator.truediv of the symbolic size); the peer's operator.truediv
converter (aten_ops_div) divides the size tensor by 4 in its integer type."""

import torch
from _common import check
from torch.export import Dim


class Scaled(torch.nn.Module):
    def forward(self, x):
        return x * (x.shape[0] / 4)


example = torch.ones(6, 2)
x = torch.ones(1, 2)  # 1 / 4 = 0.25
check(Scaled(), [example], x * 0.25, atol=1e-6,
      dynamic=[{0: Dim("batch", min=1, max=8)}], run=[x])
