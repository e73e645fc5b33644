"""int32 tensor + 0.5 (aten.add.Scalar): torch promotes to float32 and adds 0.5; the peer's
network makes 0.5 an INT32 constant (0), adds in INT32 and casts the sum to FLOAT."""

import torch
from _common import check


class AddHalf(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.add.Scalar(x, 0.5)


x = torch.arange(6, dtype=torch.int32).reshape(2, 3)
check(AddHalf(), [x], x + 0.5)
