"""aten._native_batch_norm_legit.no_stats (batch norm in training mode, no running
statistics) normalizes x with the batch's own mean and variance; the peer's converter
(aten_ops_batch_norm_legit_no_stats) calls its batch_norm with training=False and no
running_mean/running_var, which that fills with 0 and 1, so the network only scales and
shifts x."""

import torch
from _common import check


class BatchNormNoStats(torch.nn.Module):
    def forward(self, x, w, b):
        return torch.ops.aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5)[0]


x = torch.arange(12.0).reshape(2, 3, 2) * 0.5 + 1.0
w, b = torch.tensor([1.0, 2.0, 0.5]), torch.tensor([0.0, 1.0, -1.0])
expected = torch.nn.functional.batch_norm(x.double(), None, None, w.double(), b.double(),
                                          training=True, eps=1e-5).float()
check(BatchNormNoStats(), [x, w, b], expected, atol=1e-4)
