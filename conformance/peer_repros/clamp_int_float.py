"""clamp of an int tensor with a float bound: torch promotes (torch.result_type(int32
tensor, 0.5) is float32), so clamp(x, min=0.5) of 0 is 0.5; the peer's network makes the
bound an INT32 constant (0), takes the MAX in INT32 and casts the result to FLOAT, so the
clamped elements come back 0.5 too low (the promotion bug of add_scalar_int_float.py)."""

import torch
from _common import check


class Clamp(torch.nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0.5)


x = torch.tensor([-2, 0, 1, 3], dtype=torch.int32)
check(Clamp(), [x], torch.tensor([0.5, 0.5, 1.0, 3.0]))
