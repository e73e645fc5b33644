"""aten.where.self with bf16 branches: ``promote_trt_tensors_to_same_dtype``
(converter_utils.py) counts only float16 and float32 as floats, so two bf16 tensors are
"promoted" to int32 before the select and the fraction is lost (the network casts
BF16 -> INT32 -> BF16). torch.tril decomposes to where and shows the same."""

import torch
from _common import check


class Where(torch.nn.Module):
    def forward(self, c, x, y):
        return torch.where(c, x, y)


c = torch.tensor([[True, False, True]])
x = torch.tensor([[0.25, 1.5, -2.75]], dtype=torch.bfloat16)
y = torch.tensor([[3.5, -0.5, 1.25]], dtype=torch.bfloat16)
check(Where(), [c, x, y], torch.where(c, x, y))
