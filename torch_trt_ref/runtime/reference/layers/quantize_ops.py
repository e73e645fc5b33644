"""Reference semantics of TensorRT's quantization layers (QUANTIZE, DEQUANTIZE,
DYNAMIC_QUANTIZE) and of its low-precision types (FP8, INT4, FP4, E8M0): how a value is
rounded into each type (``narrow``) and read back (``widen``); see
Note [Low-precision tensors] in common.py for how each type is held."""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_map

from ..registry import reference_layer
from .common import DTYPES_BY_NAME, LOW_PRECISION

FP8_MAX = 448.0  # largest finite FP8 E4M3 value (S.1111.110)
FP4_MAX = 6.0  # largest FP4 E2M1 value (S.11.1)
# FP4 E2M1 magnitudes by 3-bit code (exponent bits, mantissa bit): 0 and 0.5 are subnormal.
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
# Largest magnitude of each quantized type: the divisor of a block's amax (DYNAMIC_QUANTIZE).
MAX_VALUE = {"FP8": FP8_MAX, "FP4": FP4_MAX, "INT8": 127.0, "INT4": 7.0}
INT_RANGE = {"INT8": (-128, 127), "INT4": (-8, 7)}


class RejectedByTensorRT(ValueError):
    """The network is one TensorRT's builder refuses to build, so there is no engine whose
    outputs the executor could state (e.g. a CAST to FP8, a non-zero zero point)."""


class Int4Tensor(torch.Tensor):
    """An INT4 tensor (dtype torch.int4) whose values live in an int8 tensor, one per byte.
    torch.int4 has no kernels, not even copy, yet TensorRT lets SHUFFLE, CONCATENATION and
    IDENTITY move INT4 tensors; every op on this wrapper runs on the int8 values, and
    int8 results come back as INT4 (TensorRT allows no arithmetic on INT4)."""

    @staticmethod
    def __new__(cls, int8: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(
            cls, int8.shape, strides=int8.stride(), storage_offset=int8.storage_offset(),
            dtype=torch.int4, device=int8.device)

    def __init__(self, int8: torch.Tensor):
        self.int8 = int8

    def __repr__(self):
        return f"Int4Tensor({self.int8!r})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(t):
            return t.int8 if isinstance(t, Int4Tensor) else t

        def wrap(t):
            return Int4Tensor(t) if isinstance(t, torch.Tensor) and t.dtype == torch.int8 else t

        return tree_map(wrap, func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {})))


# -- reading a low-precision tensor back ---------------------------------------------------

def widen(x: torch.Tensor) -> torch.Tensor:
    """The values of ``x`` in a dtype torch computes with: FP8/E8M0/FP4 -> float32,
    INT4 -> int8; every other dtype is returned as is."""
    if x.dtype == torch.float4_e2m1fn_x2:
        codes = x.view(torch.uint8) & 0xF
        table = torch.tensor(FP4_VALUES + tuple(-v for v in FP4_VALUES), device=x.device)
        return table[codes.long()]
    if isinstance(x, Int4Tensor):
        return x.int8
    if x.dtype in (torch.float8_e4m3fn, torch.float8_e8m0fnu):
        return x.float()
    return x


# -- rounding values into a low-precision type ----------------------------------------------

def _fp8(values: torch.Tensor) -> torch.Tensor:
    """Saturate to [-448, 448], then round to nearest even (torch's cast); NaN stays NaN."""
    return values.float().clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)


# Ties between two FP4 magnitudes go to the even code (mantissa bit 0): the tie at each
# midpoint goes up where the upper neighbour's code is even.
_FP4_MIDPOINTS = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
_FP4_TIE_UP = torch.tensor([False, True, False, True, False, True, False])


def _fp4(values: torch.Tensor) -> torch.Tensor:
    """Round to nearest even FP4 E2M1, saturating at +-6; one code per byte (low nibble).
    NaN has no FP4 code and becomes +6 (Note [FP4 NaN])."""
    v = values.float()
    a = v.abs().unsqueeze(-1)
    mid, up = _FP4_MIDPOINTS.to(v.device), _FP4_TIE_UP.to(v.device)
    code = ((a > mid) | ((a == mid) & up)).sum(-1)
    code = torch.where(v.isnan(), 7, code)
    sign = torch.where(v.signbit() & ~v.isnan(), 8, 0)
    return (code + sign).to(torch.uint8).view(torch.float4_e2m1fn_x2)


# Note [FP4 NaN]: FP4 E2M1 has no NaN or infinity. TensorRT does not document what a NaN
# becomes; CUDA's conversions to FP4 saturate out-of-range values to the largest finite one
# (cuda_fp4.h, __NV_SATFINITE), and we map NaN to +6 as well (ONNX's reference maps it to
# -0).


def _e8m0(values: torch.Tensor) -> torch.Tensor:
    """Round up to a power of two in [2^-127, 2^127] (Note [E8M0 rounding]); NaN stays NaN."""
    v = values.float()
    mantissa, exponent = torch.frexp(v.abs())  # |v| = mantissa * 2^exponent, mantissa in [0.5, 1)
    power = torch.where(mantissa == 0.5, exponent - 1, exponent)  # 2^power >= |v|
    power = torch.where(v.isinf(), 127, power)  # frexp(inf) has exponent 0
    power = torch.where(v > 0, power, -127).clamp(-127, 127)  # +inf saturates to 2^127
    code = torch.where(v.isnan(), 255, power + 127)
    return code.to(torch.uint8).view(torch.float8_e8m0fnu)


# Note [E8M0 rounding]: E8M0 holds only powers of two (2^-127 .. 2^127, and NaN). It appears
# as the scale type of MXFP8 block quantization, where cuDNN's block-scale quantize rounds
# the scale amax / max(to_type) *up* to a power of two, so that no element of the block
# saturates ("Block Scaling", docs.nvidia.com/cudnn, quantize_round_up); ONNX's Cast to
# E8M0 rounds up by default too (round_mode="up"). Zero and negative values, which have no
# E8M0 code, become the smallest one (2^-127).


def _int4(values: torch.Tensor) -> torch.Tensor:
    """Round half to even, saturate to [-8, 7]; held as Int4Tensor."""
    return Int4Tensor(_integer(values, "INT4"))


def _int8(values: torch.Tensor) -> torch.Tensor:
    """Round half to even, saturate to [-128, 127]."""
    return _integer(values, "INT8")


def _integer(values: torch.Tensor, name: str) -> torch.Tensor:
    low, high = INT_RANGE[name]
    if values.is_floating_point():
        values = torch.round(values.float()).nan_to_num(0.0)  # round: half to even
    return values.clamp(low, high).to(torch.int8)


_NARROW = {"FP8": _fp8, "FP4": _fp4, "E8M0": _e8m0, "INT4": _int4, "INT8": _int8}


def narrow(values: torch.Tensor, to_type: str) -> torch.Tensor:
    """``values`` (any torch dtype) rounded to nearest even into TensorRT type ``to_type``
    (FP8, FP4, INT4, INT8; E8M0 rounds up), saturating at the type's range."""
    return _NARROW[to_type](widen(values))


def represent(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``values`` as the executor holds a tensor of torch ``dtype`` (Note [Low-precision
    tensors]): the low-precision types rounded by ``narrow``, other dtypes by ``.to``. For
    feeding network inputs; ``widen`` reads any of them back."""
    name = next((n for n in LOW_PRECISION if DTYPES_BY_NAME[n] == dtype), None)
    return narrow(values, name) if name is not None else widen(values).to(dtype)


# -- CAST of low-precision types ------------------------------------------------------------

# Note [Low-precision cast]: TensorRT's builder rejects a network where a CAST (or any layer
# but a few) produces or consumes FP8, FP4, INT4 or E8M0: "Tensor output has datatype FP8
# but is not produced by IPluginLayer, IPluginV2Layer, IPluginV3Layer, IQuantizeLayer,
# IConstantLayer, IConcatenationLayer, IShuffleLayer, or IdentityLayer" and "... not
# consumed by ... IDequantizeLayer, IConcatenationLayer, IShuffleLayer, IShapeLayer, or
# IdentityLayer" (validateQuantizedTypesProducersConsumers, tensorrt_rtx 1.7, measured by
# building ONNX's Cast node cases; the ONNX parser's Cast importer notes "TRT will reject
# casts to FP8" and ignores ONNX's `saturate`). Such a network has no engine and so no
# semantics to reproduce: CAST raises. Values enter these types only through QUANTIZE,
# DYNAMIC_QUANTIZE and constants, and leave them only through DEQUANTIZE.
def cast_to(x: torch.Tensor, to_type: str) -> torch.Tensor:
    """TensorRT's ICastLayer to ``to_type`` (a DataType name)."""
    low = {to_type} & set(LOW_PRECISION) or {n for n in LOW_PRECISION
                                              if DTYPES_BY_NAME[n] == x.dtype}
    if low:
        raise RejectedByTensorRT(
            f"TensorRT's builder rejects a CAST from or to {low.pop()}: only quantize/"
            "dequantize layers convert to and from low-precision types "
            "(Note [Low-precision cast])")
    return x.to(DTYPES_BY_NAME[to_type])


# -- QUANTIZE / DEQUANTIZE --------------------------------------------------------------------

def expand_scale(scale: torch.Tensor, shape: torch.Size, axis: int) -> torch.Tensor:
    """A scale (or zero point) broadcast to ``shape``: a scalar is per-tensor; a 1-D tensor
    is per-channel along ``axis``; a tensor of the input's rank is per-block, each entry
    repeated over its block (block size = input extent // scale extent, per dim)."""
    if scale.dim() == 0 or scale.numel() == 1 and scale.dim() != len(shape):
        return scale.reshape(())
    if scale.dim() != len(shape):  # 1-D: per channel
        view = [1] * len(shape)
        view[axis % len(shape)] = -1
        return scale.reshape(view)
    for d, (n, s) in enumerate(zip(shape, scale.shape)):
        if s != n:
            scale = scale.repeat_interleave(n // s, dim=d)
    return scale


def _check_zero_point(inputs) -> None:
    """TensorRT's zero point (input 2, optional) must be all zeros: only symmetric
    quantization is supported (IQuantizeLayer, IDequantizeLayer)."""
    zero_point = inputs[2] if len(inputs) > 2 else None
    if zero_point is not None and bool((widen(zero_point) != 0).any()):
        raise RejectedByTensorRT(
            "TensorRT supports symmetric quantization only: the zero point must be all "
            f"zeros, got {widen(zero_point).flatten()[:8].tolist()}")


@reference_layer("QUANTIZE", "IQuantizeLayer", attrs=("axis", "to_type"))
def quantize(inputs, axis, to_type):
    """IQuantizeLayer: output = clamp(round(input / scale) + zeroPt), rounding half to even,
    clamped to INT8 [-128, 127], INT4 [-8, 7], FP8 [-448, 448] (FP8 and FP4 round to the
    nearest even representable value). Scale is per-tensor (scalar), per-channel (1-D along
    ``axis``) or per-block (the input's rank). The zero point must be zero.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/c-api/classnvinfer1_1_1_i_quantize_layer.html
    https://docs.nvidia.com/deeplearning/tensorrt/latest/inference-library/quantized-types-schemes.html"""
    x, scale = inputs[0], widen(inputs[1])
    _check_zero_point(inputs)
    scaled = x.float() / expand_scale(scale.float(), x.shape, axis)
    return (narrow(scaled, to_type),)


@reference_layer("DEQUANTIZE", "IDequantizeLayer", attrs=("axis", "to_type"))
def dequantize(inputs, axis, to_type):
    """IDequantizeLayer: output = (input - zeroPt) * scale in ``to_type`` (FLOAT, HALF, BF16);
    the input is INT8, INT4, FP8 or FP4, the scale per-tensor, per-channel or per-block as
    for QUANTIZE. The product is formed in float32 and rounded once to ``to_type``."""
    q, scale = widen(inputs[0]), widen(inputs[1])
    _check_zero_point(inputs)
    out = q.float() * expand_scale(scale.float(), q.shape, axis)
    return (out.to(DTYPES_BY_NAME[to_type]),)


# -- DYNAMIC_QUANTIZE -------------------------------------------------------------------------

def _block_shape(shape, axis, block_size, block_shape) -> list[int]:
    """The block's extent per dim: ``block_shape`` (-1 = the whole dim) when set, else
    ``block_size`` along ``axis`` and 1 elsewhere."""
    if block_shape:
        return [n if b == -1 else b for n, b in zip(shape, block_shape)]
    dims = [1] * len(shape)
    dims[axis % len(shape)] = block_size
    return dims


def _block_amax(x: torch.Tensor, block: list[int]) -> torch.Tensor:
    """Max |x| over each block; the result has x's shape with dim d divided by block[d]."""
    split = []
    for n, b in zip(x.shape, block):
        split += [n // b, b]
    amax = x.abs().reshape(split)
    return amax.amax(dim=tuple(range(1, 2 * x.dim(), 2)))


# Note [Dynamic quantization scale]: TensorRT documents the outputs (quantized data, block
# scales) but not the scale formula. We use the NVFP4 / MXFP8 recipe NVIDIA documents for
# its block-scaled formats: scale = amax(block) / max(to_type) / global_scale, rounded to
# scale_type (FP8: nearest even, as ModelOpt and Torch-TensorRT compute NVFP4 block scales;
# E8M0: up to a power of two, Note [E8M0 rounding]); the data is then
# narrow(x / (scale * global_scale)), the global (double-quantization) scale being input 1
# (1 when absent). A block of zeros gets scale 0 (E8M0: 2^-127) and zero data.
@reference_layer("DYNAMIC_QUANTIZE", "IDynamicQuantizeLayer",
                 attrs=("axis", "block_size", "block_shape", "to_type", "scale_type"))
def dynamic_quantize(inputs, axis, block_size, block_shape, to_type, scale_type):
    """IDynamicQuantizeLayer: per-block quantization of input 0 (FLOAT/HALF/BF16) to
    ``to_type`` (FP4 for NVFP4, FP8 for MXFP8) with block scales of ``scale_type`` (FP8,
    E8M0) computed from each block's amax; outputs (data, scales). The scales have the
    input's shape with each blocked dim divided by the block extent. TensorRT's builder
    requires the global scale for FP8 scales and forbids it for E8M0 ones (measured).
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/DynamicQuantize.html"""
    x = inputs[0].float()
    global_scale = widen(inputs[1]).float().reshape(()) if len(inputs) > 1 and \
        inputs[1] is not None else torch.ones((), device=x.device)
    block = _block_shape(x.shape, axis, block_size, block_shape)
    scale = narrow(_block_amax(x, block) / MAX_VALUE[to_type] / global_scale, scale_type)
    effective = expand_scale(widen(scale) * global_scale, x.shape, axis)
    data = torch.where(effective == 0, 0.0, x / effective)
    return narrow(data, to_type), scale

