"""aten.add.Scalar(self, other, alpha): alpha is a positional argument of this overload
(schema ``add.Scalar(Tensor self, Scalar other, Scalar alpha=1)``, unlike add.Tensor's
keyword-only ``*, alpha``), so torch.export records it in ``node.args``; the converter
``aten_ops_add`` reads ``kwargs.get("alpha", 1)`` only and computes self + other."""

import torch
from _common import check


class AddScalar(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.add.Scalar(x, 2, 3)


x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
check(AddScalar(), [x], x + 3 * 2)
