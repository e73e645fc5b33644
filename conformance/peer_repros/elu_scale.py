"""aten.elu(x, alpha, scale, input_scale): scale * (x if x > 0 else alpha * (exp(x *
input_scale) - 1)); the peer's network is one ACTIVATION ELU with alpha only."""

import torch
from _common import check


class Elu(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.elu.default(x, 2.0, 1.5, 0.5)


x = torch.linspace(-3, 3, 7)
check(Elu(), [x], torch.where(x > 0, 1.5 * x, 1.5 * 2.0 * (torch.exp(0.5 * x) - 1)))
