"""upsample_nearest2d.vec by scale factors (1.1, 2.1) of a 5x6 image: torch maps output row
i to input row floor(i * in / out) with the floored output size (out = floor(5 * 1.1) = 5,
so the rows are the identity); the peer's upsample converter (impl/upsample.py) puts the
scale factors on the IResizeLayer (layer.scales), and TensorRT (as ONNX Resize) maps by
1 / scale: i / 1.1 repeats row 0 and skips row 4. Both axes are wrong the same way."""

import torch
from _common import check


class Upsample(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.upsample_nearest2d.vec(x, None, [1.1, 2.1])


x = torch.arange(30, dtype=torch.float32).reshape(1, 1, 5, 6)
check(Upsample(), [x], Upsample()(x.double()).float())
