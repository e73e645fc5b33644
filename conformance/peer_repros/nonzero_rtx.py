"""nonzero on TensorRT-RTX: the peer's support check accepts aten.nonzero (its converter is
registered with no capability validator for TensorRT-RTX), then its converter raises
'This is only available in non TensorRT-RTX environments', so the whole compile fails
where the op should have been left to PyTorch (the partitioner does so for ops it does not
support). With standard TensorRT the script compiles and compares the indices."""

import torch
from _common import check


class NonZero(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x)


x = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
check(NonZero(), [x], torch.nonzero(x))
