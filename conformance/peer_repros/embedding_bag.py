"""aten._embedding_bag with an offsets tensor: the peer's loop over bags gathers
offsets[i + 1] for the next bag's end in every iteration, so the last one reads offsets at
index len(offsets) (one past the end: out of range for TensorRT's Gather, whose indices
must obey 0 <= I < dim). The value is unused, so the engine may still return the right sums;
run this under `compute-sanitizer --tool memcheck` to see the read. padding_idx is dropped
as well: with padding_idx=4 the bags must skip index 4; the second check shows it."""

import torch
from _common import check


class Bags(torch.nn.Module):
    def __init__(self, padding_idx):
        super().__init__()
        self.padding_idx = padding_idx

    def forward(self, weight, indices, offsets):
        return torch.ops.aten._embedding_bag.default(
            weight, indices, offsets, False, 1, False, None, False, self.padding_idx)[0]


torch.manual_seed(0)
weight = torch.randn(10, 3)
indices = torch.tensor([1, 4, 2, 4, 4, 3, 2, 9])
offsets = torch.tensor([0, 3, 3, 5])  # bag 1 is empty
# mean over each bag without the padding index 4
expected = []
for start, end in zip(offsets.tolist(), offsets.tolist()[1:] + [len(indices)]):
    rows = [weight[i] for i in indices[start:end].tolist() if i != 4]
    expected.append(torch.stack(rows).mean(0) if rows else torch.zeros(3))
check(Bags(4), [weight, indices, offsets], torch.stack(expected))
