"""trunc of bf16 values: the peer's trunc converter (impl/unary/ops.py) returns a copy of
its input when the dtype is not float16 or float32, counting bf16 as an integer type, so
bf16 values keep their fractions."""

import torch
from _common import check


class Trunc(torch.nn.Module):
    def forward(self, x):
        return torch.trunc(x)


x = torch.tensor([1.25, -2.75, 3.5, -0.5], dtype=torch.bfloat16)
check(Trunc(), [x], torch.trunc(x.double()).to(torch.bfloat16), atol=0)
