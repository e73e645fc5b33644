"""aten.log1p(x) for small x: the peer's converter computes LOG(1 + x), so 1 + x rounds to
float32 first and log1p(1e-7) comes back as ~1.19e-7 (the float32 spacing at 1), not 1e-7.
The conformance suite met it in soft_margin_loss (log1p(exp(-15))); torch computes log1p
without that rounding."""

import torch
from _common import check


class Log1p(torch.nn.Module):
    def forward(self, x):
        return torch.log1p(x)


x = torch.tensor([1e-7, 3e-7, 1e-6, 1e-3])
check(Log1p(), [x], torch.log1p(x.double()).float(), atol=1e-9)
