"""Convolution converters: ``aten.convolution`` (1d/2d/3d, grouped, dilated, transposed)
onto IConvolutionLayer / IDeconvolutionLayer."""

from __future__ import annotations

from typing import Optional

import torch

from ..._trt import trt
from .. import helpers
from ..args import conv_params
from ..blocks.nodes import fake, float_only, int_sizes, node_args
from ..blocks.shape import drop_dim
from ..registry import converter

aten = torch.ops.aten


def _conv_ok(node, settings) -> Optional[str]:
    args = node_args(node)
    reason = float_only(node, "convolution")
    if reason:
        return reason
    x, w = fake(args["input"]), fake(args["weight"])
    nd = w.dim() - 2
    if nd not in (1, 2, 3):
        return f"convolution over {nd} spatial dims is not supported"
    if x.dim() != nd + 2:
        return "unbatched convolution input is not supported"
    if not isinstance(x.shape[1], int) or not int_sizes(w.shape):
        return "convolution needs static channel and kernel dims"
    try:
        params = conv_params(args["stride"], args["padding"], args["dilation"],
                             args["output_padding"], nd)
    except ValueError as err:
        return f"convolution arguments: {err}"
    if args["transposed"]:
        constant = all(not isinstance(a, torch.fx.Node) or a.op == "get_attr"
                       for a in (args["weight"], args["bias"]))
        if x.dtype == torch.bfloat16 and not constant:
            return ("bf16 transposed convolution with a non-constant weight crashes the "
                    "TensorRT-RTX builder (Myelin)")
        if any(s > 1 for s in params["stride"]) and any(d > 1 for d in params["dilation"]):
            return "TensorRT-RTX does not support a deconvolution both strided and dilated"
        if any(op > p for op, p in zip(params["output_padding"], params["padding"])):
            return "transposed convolution with output_padding > padding is not supported"
    return None


def _operand(ctx, value, dtype, shape=None):
    """A constant weight as (trt.Weights, (stored tensor, parameter), None), or a
    non-constant one as (empty Weights, None, ITensor reshaped to ``shape``)."""
    if value is None:
        return trt.Weights(), None, None
    if isinstance(value, torch.Tensor):
        weights, stored, param = ctx.weights(value, dtype)
        return weights, (stored, param), None
    tensor = helpers.cast(ctx, value, dtype)
    if shape is not None and list(shape) != list(value.shape):
        tensor = helpers.reshape(ctx, tensor, shape)
    return trt.Weights(), None, tensor


@converter(aten.convolution.default, validator=_conv_ok, dynamic=True,
           constants=("weight", "bias"))
def convolution(ctx, input, weight, bias, stride, padding, dilation, transposed,
                output_padding, groups):
    input = helpers.itensor(ctx, input)  # a constant beside a non-constant weight
    dtype = helpers.dtype_of(input)
    if transposed and dtype == torch.bfloat16:
        # Note [bf16 deconvolution]: TensorRT-RTX has no bf16 deconvolution kernel (the
        # builder cannot type it); it runs in fp32 between two casts instead.
        out = convolution(ctx, helpers.cast(ctx, input, torch.float32), weight, bias, stride,
                          padding, dilation, transposed, output_padding, groups)
        return helpers.cast(ctx, out, dtype)
    nd = len(weight.shape) - 2
    ksize = list(weight.shape[2:])
    params = conv_params(stride, padding, dilation, output_padding, nd)
    stride, padding, dilation = params["stride"], params["padding"], params["dilation"]
    output_padding = params["output_padding"]
    x = input
    if nd == 1:  # TensorRT convolves 2 or 3 spatial dims: add a trailing unit dim
        x = helpers.insert_ones(ctx, x, len(x.shape))
        ksize, stride, padding, dilation = ksize + [1], stride + [1], padding + [0], \
            dilation + [1]
        output_padding = output_padding + [0]
    kernel, kernel_src, kernel_in = _operand(ctx, weight, dtype, list(weight.shape[:2]) + ksize)
    bias_w, bias_src, bias_in = _operand(ctx, bias, dtype)
    if transposed:
        out_maps = weight.shape[1] * groups
        layer = ctx.net.add_deconvolution_nd(x, out_maps, ksize, kernel, bias_w)
        layer.pre_padding = padding
        layer.post_padding = [p - op for p, op in zip(padding, output_padding)]
        kind = "deconvolution"
    else:
        layer = ctx.net.add_convolution_nd(x, weight.shape[0], ksize, kernel, bias_w)
        layer.padding_nd = padding
        kind = "convolution"
    layer.stride_nd = stride
    layer.dilation_nd = dilation
    layer.num_groups = groups
    ctx.name_layer(layer, kind)
    if kernel_in is not None:
        layer.set_input(1, kernel_in)
    if bias_in is not None:
        layer.set_input(2, bias_in)
    for role, src in (("kernel", kernel_src), ("bias", bias_src)):
        if src is not None:
            ctx.record_weights(layer, role, *src)
    out = layer.get_output(0)
    return drop_dim(ctx, out, -1) if nd == 1 else out

