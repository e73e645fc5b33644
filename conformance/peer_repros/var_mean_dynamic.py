"""var_mean over a dynamic dim: the peer's var decomposition (lowering/_decompositions.py,
var_decomposition) takes the element count N as float(N - correction) of the symbolic
sizes, which torch.export's tracing evaluates at the example's shape: the network divides
the sums by constants (its div_rhs layers) counted at the compile shape (2, 3, 4), so at
any other batch size mean and variance are wrong."""

import torch
from _common import check
from torch.export import Dim


class VarMean(torch.nn.Module):
    def forward(self, x):
        return torch.var_mean(x, [0, 2], keepdim=True)  # correction 1


torch.manual_seed(0)
example = torch.randn(2, 3, 4)
x = torch.randn(4, 3, 4)  # batch 4: 16 elements per channel, not 8
var, mean = torch.var_mean(x.double(), [0, 2], keepdim=True)
check(VarMean(), [example], (var.float(), mean.float()), atol=1e-5,
      dynamic=[{0: Dim("batch", min=1, max=4)}], run=[x])
