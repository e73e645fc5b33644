"""resize to a size that holds a dynamic dim (x.clone().resize_([n * 4]), which
functionalization makes aten.resize): the peer's support check accepts the node
(aten.resize_ is in its converter table), then the compile raises torch's 'isIntList()
INTERNAL ASSERT FAILED ... Expected IntList but got GenericList': the size list holds a
symbolic int. With a static batch the same graph compiles."""

import torch
from _common import check
from torch.export import Dim


class Flatten(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.resize_.default(x.clone(), [x.shape[0] * x.shape[1]])


x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
check(Flatten(), [x], x.reshape(12), dynamic=[{0: Dim("n", min=1, max=5)}])
