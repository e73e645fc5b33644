"""ceil_mode max/avg pooling over dynamic spatial dims (Note [ceil_mode] in
torch_trt_ref/conversion/converters/pooling.py): one engine, judged against eager in
float64 at every spatial size of the declared range, output shapes exact."""

import itertools

import pytest
import torch
import torch.nn.functional as F

import torch_trt_ref
from torch_trt_ref import Input
from torch_trt_ref.accuracy import judge

# (min, opt, max) of (N, C, H, W); H and W sweep sizes where ATen drops the last window
# (it would start in the right padding) and sizes where it does not.
RANGE_2D = ((1, 2, 6, 5), (2, 2, 8, 7), (4, 2, 11, 12))
DROPS = ([2, 3], [3, 2], [1, 1])  # H: kernel 2, stride 3, padding 1 drop it at 7, 8, 10, 11

MODELS = {
    "max2d": (lambda x: F.max_pool2d(x, [3, 2], [2, 2], [1, 0], [1, 1], True), RANGE_2D),
    "max2d_drops": (lambda x: F.max_pool2d(x, *DROPS, 1, True), RANGE_2D),
    "avg2d_no_pad": (lambda x: F.avg_pool2d(x, 3, 2, 0, True), RANGE_2D),
    "avg2d_pad_counted": (lambda x: F.avg_pool2d(x, *DROPS, True, True), RANGE_2D),
    "avg2d_pad_excluded": (lambda x: F.avg_pool2d(x, *DROPS, True, False), RANGE_2D),
    "avg2d_divisor": (lambda x: F.avg_pool2d(x, *DROPS, True, True, 5), RANGE_2D),
    "avg1d_pad_counted": (lambda x: F.avg_pool1d(x, 3, 3, 1, True, True),
                          ((1, 2, 5), (2, 2, 9), (3, 2, 16))),
    "avg3d_pad_counted": (lambda x: F.avg_pool3d(x, [2, 3, 2], [3, 3, 2], [1, 1, 0], True),
                          ((1, 2, 4, 5, 4), (2, 2, 5, 6, 5), (2, 2, 8, 8, 7))),
}


class Pool(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@pytest.mark.parametrize("name", list(MODELS))
def test_every_size_of_a_dynamic_spatial_range(name):
    fn, (lo, opt, hi) = MODELS[name]
    model = Pool(fn).eval()
    compiled = torch_trt_ref.compile(model, [Input(min_shape=lo, opt_shape=opt, max_shape=hi)],
                                     min_block_size=1, executor="reference")
    assert compiled.compile_report.counts == {"tensorrt": 1}  # no PyTorch segment
    spatial = [range(a, b + 1) for a, b in zip(lo[2:], hi[2:])]
    for size in itertools.product(*spatial):
        batch = size[0] % hi[0] + 1  # the batch varies too
        x = torch.randn(batch, lo[1], *size, generator=torch.Generator().manual_seed(sum(size)))
        with torch.no_grad():
            verdict = judge(compiled(x), model(x), model(x.double()))
        assert verdict.passed, f"size {size}: {verdict.message}"
