"""Conformance cases: convolution (1d/2d/3d, strided, padded, dilated, grouped, depthwise,
no bias, transposed, non-constant weight)."""

import torch

from ..case import Case, T, W

aten = torch.ops.aten
conv = aten.convolution.default


def _conv(x, w, b, stride, padding, dilation, groups=1, name="", transposed=False,
          output_padding=None, **kw):
    nd = len(stride)
    return Case(conv, (x, w, b, stride, padding, dilation, transposed,
                       output_padding or [0] * nd, groups), name=name, **kw)


CASES = [
    _conv(T((2, 3, 8, 8)), W((4, 3, 3, 3)), W((4,)), [1, 1], [1, 1], [1, 1], name="2d"),
    _conv(T((1, 3, 9, 7)), W((6, 3, 3, 2)), None, [2, 1], [0, 1], [1, 1], name="2d_stride_nobias"),
    _conv(T((1, 4, 9, 9)), W((4, 2, 3, 3)), W((4,)), [1, 1], [2, 2], [2, 2], groups=2,
          name="2d_dilated_grouped"),
    _conv(T((2, 6, 7, 7)), W((6, 1, 3, 3)), W((6,)), [2, 2], [1, 1], [1, 1], groups=6,
          name="2d_depthwise"),
    _conv(T((2, 3, 10)), W((5, 3, 3)), W((5,)), [2], [1], [1], name="1d"),
    _conv(T((1, 2, 5, 6, 6)), W((3, 2, 3, 3, 3)), W((3,)), [1, 2, 2], [1, 1, 1], [1, 1, 1],
          name="3d"),
    _conv(T((1, 4, 5, 5)), W((4, 3, 3, 3)), W((3,)), [2, 2], [1, 1], [1, 1], transposed=True,
          output_padding=[1, 1], name="transposed_2d"),
    _conv(T((1, 4, 4, 5)), W((4, 2, 2, 3)), None, [1, 1], [0, 1], [1, 2], groups=2,
          transposed=True, name="transposed_grouped_dilated"),
    _conv(T((1, 2, 4, 5)), W((2, 2, 3, 3)), None, [2, 2], [1, 1], [2, 2], transposed=True,
          name="transposed_strided_dilated", dtypes=(torch.float32,), dynamic=False,
          xfail={torch.float32: "TensorRT-RTX rejects deconvolution both strided and dilated"}),
    _conv(T((2, 4, 7)), W((4, 2, 3)), W((2,)), [2], [1], [1], transposed=True,
          name="transposed_1d"),
    _conv(T((1, 3, 6, 6)), T((4, 3, 3, 3), dynamic=()), T((4,), dynamic=()), [1, 1], [0, 0],
          [1, 1], name="weight_input"),
    _conv(T((1, 4, 5)), T((4, 3, 3), dynamic=()), T((3,), dynamic=()), [2], [1], [1],
          transposed=True, output_padding=[1], name="transposed_weight_input",
          xfail={torch.bfloat16: "bf16 deconvolution with a non-constant weight crashes the "
                                 "TensorRT-RTX builder (validator rejects)"}),
]
