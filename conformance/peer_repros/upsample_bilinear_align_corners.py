"""upsample_bilinear2d.vec with align_corners=True by scale factors (1.5, 0.75) of a 7x6
image: with align_corners torch maps output index i to i * (in - 1) / (out - 1), the
corners of input and output aligned (out = floor(in * scale): 10 x 4); the peer's upsample
converter (impl/upsample.py) puts the scale factors on the IResizeLayer (layer.scales), and
with scales TensorRT's ALIGN_CORNERS maps by x * (in - 1) / (in * scale - 1) with the
unfloored in * scale (as ONNX's Resize): the last output row and column are not the input's
last."""

import torch
from _common import check


class Upsample(torch.nn.Module):
    def forward(self, x):
        return torch.ops.aten.upsample_bilinear2d.vec(x, None, True, [1.5, 0.75])


x = torch.arange(42, dtype=torch.float32).reshape(1, 1, 7, 6)
check(Upsample(), [x], Upsample()(x.double()).float(), atol=1e-4)
