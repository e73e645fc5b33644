"""scatter_reduce(..., reduce="mean") of a float tensor: torch divides each sum by its count
(a true division: means have fractions); the peer's scatter_reduce decomposition
(lowering/_decompositions.py, scatter_reduce_decomposition) divides with torch.div(...,
rounding_mode='trunc') for every dtype, so each mean is truncated toward zero."""

import torch
from _common import check


class ScatterMean(torch.nn.Module):
    def forward(self, x, index, src):
        return x.scatter_reduce(1, index, src, reduce="mean")


x = torch.tensor([[1.0, 0.0, -1.0]])
index = torch.tensor([[0, 0, 2, 2]])
src = torch.tensor([[2.0, 4.0, -1.0, -3.0]])
# include_self: column 0 is (1 + 2 + 4) / 3, column 1 keeps 0, column 2 (-1 - 1 - 3) / 3
expected = torch.tensor([[7 / 3, 0.0, -5 / 3]])
check(ScatterMean(), [x, index, src], expected, atol=1e-5)
