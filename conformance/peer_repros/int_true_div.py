"""Division of int tensors is true division in torch (torch.div(int, 2) and
reciprocal of an int are float: 1/2 = 0.5); the peer's network divides in the integer type
and casts the quotient, so 1/2 comes back 0. The same integer division reaches
operator.truediv of a dynamic size: size_true_div.py."""

import torch
from _common import check


class IntDiv(torch.nn.Module):
    def forward(self, x):
        return torch.cat([torch.div(x, 2), torch.reciprocal(x)])


x = torch.tensor([1, 2, 3, 5], dtype=torch.int32)
check(IntDiv(), [x], torch.cat([x.double() / 2, 1 / x.double()]).float(), atol=1e-6)
