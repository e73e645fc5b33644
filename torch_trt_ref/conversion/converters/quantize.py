"""Converters of the quantizer ops (DESIGN D13): ``tensorrt::quantize_op`` onto an
IQuantizeLayer + IDequantizeLayer pair (INT8, FP8 E4M3) and
``tensorrt::dynamic_block_quantize_op`` (NVFP4) onto IDynamicQuantizeLayer + two
IDequantizeLayers, in the strongly typed network. Validators reject what TensorRT rejects."""

from __future__ import annotations

from typing import Optional

import torch
from torch.fx import Node

from ..._trt import to_trt_dtype, trt
from ...quantization.ops import (
    FP4_MAX,
    FP8_MAX,
    QUANTIZE_OPS,
    format_of,
    fp4_codes,
    nvfp4_blocks,
)
from .. import helpers
from .._trt_ops import EW
from ..blocks.nodes import FLOAT_DTYPES, fake, node_args
from ..blocks.quantize import MAX_VALUE, TRT_TYPE, constant_value, qdq, quantize_activation
from ..registry import converter

quantize_op, block_quantize_op, block_quantize_none = QUANTIZE_OPS


def channel_axis(amax: torch.Tensor) -> Optional[int]:
    """None for a per-tensor amax (one element), else the one dim it varies along."""
    if amax.numel() == 1:
        return None
    dims = [d for d, n in enumerate(amax.shape) if n != 1]
    return dims[0] if len(dims) == 1 else -1


def _quantize_ok(node: Node, settings) -> Optional[str]:
    args = node_args(node)
    x, fmt = fake(args["input"]), format_of(args["num_bits"], args["exponent_bits"])
    if fmt not in MAX_VALUE:
        return (f"TensorRT quantizes to INT8 (num_bits 8, exponent_bits 0) or FP8 E4M3 (8, 4) "
                f"only, not ({args['num_bits']}, {args['exponent_bits']})")
    if args["unsigned"]:
        return "TensorRT has no unsigned quantization"
    if x is None or x.dtype not in FLOAT_DTYPES:
        return f"TensorRT quantizes fp32/fp16/bf16 tensors only (got {getattr(x, 'dtype', x)})"
    amax = constant_value(args["amax"])
    if amax is None:
        return "amax is computed at run time; TensorRT needs a build-time scale"
    if not bool(torch.isfinite(amax).all()) or not _zero_only_where_zero(
            amax, constant_value(args["input"])):
        return "an amax of 0 (or inf/NaN) gives a scale TensorRT rejects (scales must be > 0)"
    axis = channel_axis(amax)
    if axis is None:
        return None
    if fmt == "fp8":
        return "TensorRT quantizes FP8 per tensor only (this amax is per channel)"
    want = _kernel_axis(node)
    if axis != want or amax.dim() != x.dim():
        return (f"TensorRT quantizes a kernel per channel along its output channels only: axis "
                f"0, or axis 1 of a deconvolution (groups 1) kernel (amax shape "
                f"{list(amax.shape)}{', read by a deconvolution' if want == 1 else ''})"
                if want is not None else
                "TensorRT quantizes a grouped deconvolution's kernel per tensor only (its axis "
                "1 holds out_channels / groups)")
    if constant_value(args["input"]) is None:
        return "TensorRT quantizes activations per tensor only (per channel: weights)"
    return None


def _kernel_axis(node: Node) -> Optional[int]:
    """The output-channel axis of the kernel a weight quantizer feeds: 1 when every reader is
    a transposed convolution (PyTorch's (in, out / groups, k...) kernel: TensorRT's
    IDeconvolutionLayer takes per-channel scales along its output maps), None when one of
    those is grouped (no single axis holds the output maps), else 0."""
    readers = list(node.users)
    deconv = [u for u in readers if u.target == torch.ops.aten.convolution.default
              and node_args(u)["transposed"] and node_args(u)["weight"] is node]
    if not readers or len(deconv) != len(readers):
        return 0
    return 1 if all(node_args(u)["groups"] == 1 for u in deconv) else None


def _zero_only_where_zero(amax: torch.Tensor, weight: Optional[torch.Tensor]) -> bool:
    """amax > 0 everywhere, or a constant input that is 0 wherever its amax is 0 (a
    zero-initialized layer, or a zero channel, quantizes to 0 under any scale: the converter
    gives those channels scale 1; TensorRT rejects a scale of 0)."""
    if bool((amax > 0).all()):
        return True
    if weight is None or bool((amax < 0).any()):
        return False
    return bool((torch.where(amax == 0, weight, 0) == 0).all())


# Note [Narrow range]: ModelOpt's INT8 quantizers use the narrow range [-127, 127] (its
# default narrow_range=True), while TensorRT's IQuantizeLayer clamps INT8 to [-128, 127]: an
# activation below -127.5 * scale would be -128 in the engine and -127 eagerly. The converter
# clamps such inputs at -amax (an elementwise MAX before the quantize layer), which maps to
# exactly -127; a constant (weight) input needs no clamp when it does not reach there.
@converter(quantize_op, validator=_quantize_ok, dynamic=True, family="quantize",
           constants=("input", "amax"))
def quantize(ctx, input, amax, num_bits, exponent_bits, unsigned, narrow_range):
    fmt = format_of(num_bits, exponent_bits)
    if not isinstance(input, torch.Tensor):  # an activation: per tensor (the validator)
        return quantize_activation(ctx, input, amax, fmt, narrow_range)
    dtype = helpers.dtype_of(input)
    # channels of amax 0 hold only zeros (the validator)
    amax = torch.where(amax > 0, amax, torch.ones_like(amax))
    scale = (amax.float() / MAX_VALUE[fmt]).to(dtype)
    axis = channel_axis(amax)
    scale = scale.reshape(()) if axis is None else scale.flatten()
    low = -amax.to(dtype).reshape(amax.shape)
    needs_clamp = fmt == "int8" and narrow_range and bool((input < low).any())
    input = ctx.constant(input)
    if needs_clamp:  # Note [Narrow range]
        input = helpers.elementwise(ctx, EW.MAX, input, low)
    return qdq(ctx, input, ctx.constant(scale), TRT_TYPE[fmt], dtype, axis or 0)


def _block_ok(node: Node, settings) -> Optional[str]:
    args = node_args(node)
    formats = (format_of(args["num_bits"], args["exponent_bits"]),
               format_of(args["scale_num_bits"], args["scale_exponent_bits"]))
    if formats != ("fp4", "fp8"):
        return "TensorRT's dynamic block quantization here is NVFP4 (FP4 data, FP8 scales) only"
    x = fake(args["input"])
    if x is None or x.dtype not in FLOAT_DTYPES:
        return f"TensorRT quantizes fp32/fp16/bf16 tensors only (got {getattr(x, 'dtype', x)})"
    if args["block_size"] != 16:
        return f"NVFP4 blocks hold 16 elements in TensorRT (got {args['block_size']})"
    if not isinstance(x.shape[-1], int) or x.shape[-1] % 16 or x.dim() not in (2, 3):
        return "TensorRT's NVFP4 quantizes 2-D/3-D tensors with a static last dim divisible by 16"
    amax = constant_value(args.get("amax"))
    if amax is None or not bool((amax > 0).all()):
        return "NVFP4 needs a build-time global amax > 0"
    return None


# Note [NVFP4 weights]: TensorRT takes NVFP4 weights pre-quantized (an FP4 constant and its
# FP8 block-scale constant, each behind an IDequantizeLayer: "when using pre-quantized
# weights, an IDequantizeLayer is required between the weights and the linear operator"),
# as Torch-TensorRT's NVFP4 converter builds them; IDynamicQuantizeLayer is for activations.
# A weight quantizer's input is a constant here, so the converter encodes it at build time
# (quantization.ops.nvfp4_blocks, the eager kernel's own arithmetic) in torch calls that the
# weight program records: refit re-encodes new weights as a fresh compile would.
@converter(block_quantize_op, validator=_block_ok, dynamic=True, family="quantize",
           constants=("input", "amax"))
def block_quantize(ctx, input, block_size, amax, num_bits, exponent_bits, scale_num_bits,
                   scale_exponent_bits):
    """NVFP4: global scale = amax / (6 * 448); IDynamicQuantizeLayer computes the FP8 block
    scales and FP4 data along the last dim of an activation (a weight is encoded at build
    time: Note [NVFP4 weights]); the block scales are dequantized with the global scale and
    the data with the dequantized block scales."""
    dtype = helpers.dtype_of(input)
    global_scale = ctx.constant((amax.float() / (FP4_MAX * FP8_MAX)).reshape(()).to(dtype))
    if isinstance(input, torch.Tensor):  # a weight: Note [NVFP4 weights]
        values, scale8, _ = nvfp4_blocks(input.float(), block_size, amax.float().reshape(()))
        data_in = ctx.constant(fp4_codes(values).reshape(input.shape))
        scales_in = ctx.constant(scale8.squeeze(-1))
    else:
        layer = ctx.name_layer(ctx.net.add_dynamic_quantize(
            input, len(input.shape) - 1, block_size, trt.fp4, trt.fp8), "dynamic_quantize")
        layer.set_input(1, global_scale)
        data_in, scales_in = layer.get_output(0), layer.get_output(1)
    axis = len(data_in.shape) - 1
    scales = ctx.name_layer(ctx.net.add_dequantize(scales_in, global_scale,
                                                   to_trt_dtype(dtype)), "dequantize")
    data = ctx.name_layer(ctx.net.add_dequantize(data_in, scales.get_output(0),
                                                 to_trt_dtype(dtype)), "dequantize")
    data.axis = axis
    return data.get_output(0)

