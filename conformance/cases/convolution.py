"""Conformance cases: convolution (1d/2d/3d, strided, padded, dilated, grouped, depthwise,
no bias, transposed, non-constant weight)."""

import torch
import torch.nn.functional as F

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

# Spellings of the int-list arguments as models write them (Note [ATen int lists] in
# torch_trt_ref/conversion/args.py): a bare int, a one-element list (ATen repeats it over
# every spatial dim) and a full list; the dynamic variant varies batch and spatial dims.
SPELLINGS = {"int": lambda v, nd: v, "one": lambda v, nd: [v], "full": lambda v, nd: [v] * nd}
# stride as an int (F.conv*d expands it to a full list), padding and output_padding as
# one-element lists, dilation as a full list: reached the converter as [s, s], [p], [d, d]
MIXED = {"stride": "int", "padding": "one", "output_padding": "one", "dilation": "full"}
_FORWARD = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_TRANSPOSED = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_SPATIAL = (9, 8, 7)  # >= 6 at the minimum: torch export guards on output size 1


def _spelled(nd: int, transposed: bool, spelling: str) -> Case:
    def s(name, v):
        return SPELLINGS[MIXED[name] if spelling == "mixed" else spelling](v, nd)

    x = T((2, 4) + _SPATIAL[:nd], dynamic=(0,) + tuple(range(2, nd + 2)))
    if transposed:  # strided and dilated at once is not supported by TensorRT-RTX
        args = (x, W((4, 3) + (3,) * nd), W((3,)), s("stride", 2), s("padding", 1),
                s("output_padding", 1), 1, s("dilation", 1))
        fn, kind = _TRANSPOSED[nd], "transposed"
    else:
        args = (x, W((3, 4) + (3,) * nd), W((3,)), s("stride", 2), s("padding", 1),
                s("dilation", 2))
        fn, kind = _FORWARD[nd], "conv"
    return Case(fn, args, name=f"{kind}{nd}d_{spelling}", check_op=conv,
                dtypes=(torch.float32,))


CASES += [_spelled(nd, transposed, spelling) for nd in (1, 2, 3) for transposed in
          (False, True) for spelling in list(SPELLINGS) + ["mixed"]]
