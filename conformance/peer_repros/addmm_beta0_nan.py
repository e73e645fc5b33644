"""torch.addmm(input, a, b, beta=0): "If beta is 0, then input will be ignored, and nan
and inf in it will not be propagated" (torch.addmm's documentation); the peer's network
multiplies input by 0 and adds it, so a NaN in input makes its whole row or column NaN."""

import torch
from _common import check


class AddmmBeta0(torch.nn.Module):
    def forward(self, c, a, b):
        return torch.addmm(c, a, b, beta=0.0)


c = torch.tensor([[float("nan"), 1.0], [2.0, 3.0]])
a, b = torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([[0.5, -1.0], [1.5, 2.0]])
check(AddmmBeta0(), [c, a, b], a @ b)
