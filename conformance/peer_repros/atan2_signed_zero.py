"""atan2(y, x) for y = +0 or -0 and x < 0 is +pi or -pi (C99 and IEEE 754, as
torch.atan2); the peer's composite atan2 (TensorRT has no atan2 layer) returns the other
sign for one of them: an error of 2*pi at exactly those elements."""

import torch
from _common import check


class Atan2(torch.nn.Module):
    def forward(self, y, x):
        return torch.atan2(y, x)


y = torch.tensor([0.0, -0.0, 1.0, -1.0])
x = torch.tensor([-1.0, -1.0, -1.0, -1.0])
check(Atan2(), [y, x], torch.atan2(y.double(), x.double()).float(), atol=1e-5)
