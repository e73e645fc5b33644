"""softplus(x, beta, threshold) is x where beta * x > threshold
(torch.nn.functional.softplus); the peer's converter takes beta only (one ACTIVATION
SOFTPLUS layer), so the threshold is dropped and the values above it are log(1 +
exp(beta * x)) / beta instead of x."""

import torch
from _common import check


class Softplus(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.softplus(x, beta=3.0, threshold=0.2)


x = torch.tensor([-1.0, 0.0, 0.05, 0.1, 0.5, 1.0])
check(Softplus(), [x], torch.nn.functional.softplus(x.double(), 3.0, 0.2).float(),
      atol=1e-5)
