"""Conformance cases: the quantizer ops (``tensorrt::quantize_op`` INT8/FP8, per tensor and
per channel; ``tensorrt::dynamic_block_quantize_op`` NVFP4): random values, rounding ties,
saturation, negative zero, empty tensors, dynamic shapes; and quantized attention
(``torch_trt_ref::quantized_sdpa``, INT8/FP8: float and bool masks, causal, GQA, dynamic
sequence lengths). The eager op is the reference; it is itself checked against
torch.fake_quantize_* and the float8_e4m3fn cast in tests/test_quantization.py, and
quantized attention against torch's SDPA in tests/test_quantization_attention.py."""

import torch

from torch_trt_ref.quantization.attention_op import QUANTIZED_SDPA as qsdpa
from torch_trt_ref.quantization.ops import dynamic_block_quantize_op as block
from torch_trt_ref.quantization.ops import quantize_op as q

from ..case import Case, T, W

F32 = torch.float32
ONE = (F32,)


def amax(value, shape=()):
    """A build-time amax (weight) of ``value`` (a number or nested list)."""
    return W(shape, dtype=F32, values=value)


# INT8 ties at scale 1 (amax 127): half to even; narrow range saturates at +-127
INT8_TIES = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, -126.5, 127.5, -127.5, 300.0, -300.0,
             -0.0, 0.0]
# FP8 E4M3 at scale 1 (amax 448): 1.0625 and 1.1875 are ties (mantissa step 0.125 in
# [1, 2)) -> 1.0 and 1.25 (even mantissa); 464 is past 448 and saturates; -0 stays -0
FP8_TIES = [1.0625, 1.1875, -1.0625, 17.0, 19.0, 464.0, -1000.0, 0.0009765625, -0.0, 0.0,
            240.0, 248.0]

CASES = [
    Case(q, (T((2, 3, 8), low=-3, high=3), amax(2.0), 8, 0, False, True), name="int8"),
    Case(q, (T((4, 8), low=-6, high=6), amax(2.0), 8, 0, False, True), name="int8_saturate"),
    Case(q, (T((4, 8), low=-6, high=6), amax(2.0), 8, 0, False, False), name="int8_wide"),
    Case(q, (T((14,), values=INT8_TIES), amax(127.0), 8, 0, False, True), name="int8_ties",
         dtypes=ONE),
    Case(q, (T((14,), values=INT8_TIES), amax(127.0), 8, 0, False, False),
         name="int8_ties_wide", dtypes=ONE),
    Case(q, (W((4, 3, 2)), amax([[[1.0]], [[2.0]], [[0.5]], [[3.0]]], (4, 1, 1)), 8, 0,
             False, True), name="int8_per_channel_weight", dtypes=ONE, dynamic=False),
    Case(q, (T((0, 4), dynamic=()), amax(2.0), 8, 0, False, True), name="int8_empty",
         dtypes=ONE),
    Case(q, (T((2, 3, 8), low=-3, high=3), amax(2.0), 8, 4, False, False), name="fp8"),
    Case(q, (T((4, 8), low=-6, high=6), amax(2.0), 8, 4, False, False), name="fp8_saturate"),
    Case(q, (T((12,), values=FP8_TIES), amax(448.0), 8, 4, False, False), name="fp8_ties",
         dtypes=ONE),
    Case(q, (T((0, 4), dynamic=()), amax(2.0), 8, 4, False, False), name="fp8_empty",
         dtypes=ONE),
    Case(block, (T((4, 32), low=-3, high=3), 16, amax(3.0), 4, 2, 8, 4), name="nvfp4",
         dtypes=ONE, dynamic=False),
    # quantized attention: amax of q, k, v (values in [-2, 2]) and of P (at most 1)
    Case(qsdpa, (T((1, 2, 4, 8), dynamic=(2,)), T((1, 2, 6, 8), dynamic=(2,)),
                 T((1, 2, 6, 8), dynamic=(2,)), amax(2.0), amax(2.0), amax(2.0), amax(1.0)),
         name="attention_int8"),
    Case(qsdpa, (T((1, 2, 4, 8), dynamic=(2,)), T((1, 2, 6, 8), dynamic=(2,)),
                 T((1, 2, 6, 8), dynamic=(2,)), amax(2.0), amax(2.0), amax(2.0), amax(1.0)),
         {"num_bits": 8, "exponent_bits": 4, "narrow_range": False}, name="attention_fp8"),
    Case(qsdpa, (T((1, 2, 4, 8)), T((1, 2, 4, 8)), T((1, 2, 4, 8)), amax(2.0), amax(2.0),
                 amax(2.0), amax(1.0)), {"is_causal": True}, name="attention_causal",
         dynamic=False),
    Case(qsdpa, (T((1, 2, 4, 8)), T((1, 2, 6, 8)), T((1, 2, 6, 8)), amax(2.0), amax(2.0),
                 amax(2.0), amax(1.0), T((4, 6), torch.bool)),
         {"num_bits": 8, "exponent_bits": 4, "narrow_range": False},
         name="attention_bool_mask", dynamic=False),
    Case(qsdpa, (T((1, 4, 4, 8)), T((1, 2, 6, 8)), T((1, 2, 6, 8)), amax(2.0), amax(2.0),
                 amax(2.0), amax(1.0), T((4, 6))), {"scale": 0.3, "enable_gqa": True},
         name="attention_gqa_float_mask", dynamic=False),
]
