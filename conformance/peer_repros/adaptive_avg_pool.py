"""aten._adaptive_avg_pool2d where the output size does not divide the input size: torch
averages window i over [floor(i*in/out), ceil((i+1)*in/out)) (windows of different sizes);
the peer builds one POOLING AVERAGE with stride in // out and a fixed window
in - (out - 1) * stride (7 -> 4: window 4, stride 1), which averages other elements."""

import torch
from _common import check


class Pool(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten._adaptive_avg_pool2d.default(x, [1, 4])


x = torch.arange(7.0).reshape(1, 1, 1, 7)
# windows [0,2) [1,4) [3,6) [5,7) -> means 0.5, 2, 4, 5.5
check(Pool(), [x], torch.tensor([[[[0.5, 2.0, 4.0, 5.5]]]]))
