"""roll by a shift larger than the dim: torch.roll(x, [-5, 2], [0, -1]) on 3 x 4 rolls the
rows by -5 mod 3 = 1; the peer's network is one SLICE in WRAP mode starting at (3, 2)
without reducing 5 modulo 3, and start 3 wraps to 0: the rows are not rolled at all."""

import torch
from _common import check


class Roll(torch.nn.Module):
    def forward(self, x):
        return torch.roll(x, [-5, 2], [0, -1])


x = torch.arange(12.0).reshape(3, 4)
check(Roll(), [x], torch.roll(x, [-5, 2], [0, -1]), atol=0)
