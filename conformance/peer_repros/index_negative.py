"""x[i, :, j] (aten.index.Tensor with two index tensors, not adjacent): torch wraps a
negative index (j = -1 is the last column); the peer's converter (impl/select.py index)
flattens the indexed dims to one linear index i * 5 + j and gathers without wrapping j, so
j = -1 reads row i * 5 - 1 of the flattened input: the last column of the previous i (here
x[1, :, 4] in place of x[2, :, 4]). Static and dynamic inputs alike (the suite's dynamic
cell drew a negative j, its static cell did not)."""

import torch
from _common import check


class IndexSplit(torch.nn.Module):
    def forward(self, x, i, j):
        return x[i, :, j]


x = torch.arange(60, dtype=torch.float32).reshape(4, 3, 5)
i, j = torch.tensor([0, 2]), torch.tensor([1, -1])
check(IndexSplit(), [x, i, j], torch.stack([x[0, :, 1], x[2, :, 4]]))  # j = -1: column 4
