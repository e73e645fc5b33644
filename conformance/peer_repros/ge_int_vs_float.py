"""int tensor >= 0.5 compares in float in torch (torch.result_type promotes the int tensor);
the peer's network makes 0.5 an int constant (0), so 0 >= 0.5 comes back True: the
promotion bug of add_scalar_int_float.py in a comparison."""

import torch
from _common import check


class GeHalf(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.ge.Scalar(x, 0.5)


x = torch.tensor([-1, 0, 1, 2], dtype=torch.int32)
check(GeHalf(), [x], x.double() >= 0.5, atol=0)
