"""Reference semantics of TensorRT's neural-network layers: convolution, deconvolution,
pooling, normalization, resize, parametric ReLU."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..registry import reference_layer
from .common import axes_from_mask

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def _explicit_pad(x, pre, post, value=0.0):
    pads = []
    for a, b in reversed(list(zip(pre, post))):
        pads += [a, b]
    if not any(pads):
        return x
    return F.pad(x, pads, value=value)


_CONV_ATTRS = ("num_output_maps", "kernel_size_nd", "stride_nd", "dilation_nd", "num_groups",
               "pre_padding", "post_padding", "padding_mode")


def _kernel(inputs, kernel, out_maps, in_channels, groups, ksize, transposed):
    if len(inputs) > 1 and inputs[1] is not None:
        return inputs[1]
    if transposed:
        return kernel.reshape(in_channels, out_maps // groups, *ksize)
    return kernel.reshape(out_maps, in_channels // groups, *ksize)


def _bias(inputs, bias):
    if len(inputs) > 2 and inputs[2] is not None:
        return inputs[2]
    return bias


@reference_layer("CONVOLUTION", "IConvolutionLayer", attrs=_CONV_ATTRS,
                 weights=("kernel", "bias"))
def convolution(inputs, num_output_maps, kernel_size_nd, stride_nd, dilation_nd, num_groups,
                pre_padding, post_padding, padding_mode, kernel, bias):
    """Cross-correlation over the innermost len(kernel_size) dims with explicit pre/post
    padding (EXPLICIT_ROUND_DOWN), groups and dilation."""
    x = inputs[0]
    nd = len(kernel_size_nd)
    w = _kernel(inputs, kernel, num_output_maps, x.shape[1], num_groups, kernel_size_nd, False)
    x = _explicit_pad(x, pre_padding, post_padding)
    return (_CONV[nd](x, w.to(x.dtype), _bias(inputs, bias), stride_nd, 0, dilation_nd,
                      num_groups),)


@reference_layer("DECONVOLUTION", "IDeconvolutionLayer", attrs=_CONV_ATTRS,
                 weights=("kernel", "bias"))
def deconvolution(inputs, num_output_maps, kernel_size_nd, stride_nd, dilation_nd, num_groups,
                  pre_padding, post_padding, padding_mode, kernel, bias):
    """Transposed convolution; pre/post padding crop the full output (TensorRT's
    deconvolution padding removes rows, like torch's padding argument)."""
    x = inputs[0]
    nd = len(kernel_size_nd)
    w = _kernel(inputs, kernel, num_output_maps, x.shape[1], num_groups, kernel_size_nd, True)
    out = _CONV_T[nd](x, w.to(x.dtype), _bias(inputs, bias), stride_nd, 0, 0, num_groups,
                      dilation_nd)
    for i, (a, b) in enumerate(zip(pre_padding, post_padding)):
        d = out.dim() - nd + i
        out = out.narrow(d, a, out.shape[d] - a - b)
    return (out,)


@reference_layer("POOLING", "IPoolingLayer",
                 attrs=("type", "window_size_nd", "stride_nd", "pre_padding", "post_padding",
                        "padding_mode", "average_count_excludes_padding"))
def pooling(inputs, type, window_size_nd, stride_nd, pre_padding, post_padding, padding_mode,
            average_count_excludes_padding):
    """MAX pads with -inf; AVERAGE divides by the window area, or by the count of
    non-padding elements when average_count_excludes_padding."""
    x = inputs[0]
    nd = len(window_size_nd)
    if padding_mode not in ("EXPLICIT_ROUND_DOWN", None):
        raise NotImplementedError(f"pooling padding_mode {padding_mode}")
    pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nd]
    if type == "MAX":
        xp = _explicit_pad(x, pre_padding, post_padding, value=float("-inf"))
        maxpool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd]
        return (maxpool(xp, window_size_nd, stride_nd),)
    xp = _explicit_pad(x, pre_padding, post_padding)
    area = float(math.prod(window_size_nd))
    summed = pool(xp.float(), window_size_nd, stride_nd) * area
    if average_count_excludes_padding:
        ones = _explicit_pad(torch.ones_like(x[:1, :1], dtype=torch.float32), pre_padding,
                             post_padding)
        count = pool(ones, window_size_nd, stride_nd) * area
    else:
        count = area
    return ((summed / count).to(x.dtype),)


@reference_layer("NORMALIZATION", "INormalizationLayer",
                 attrs=("axes", "epsilon", "num_groups", "compute_precision"))
def normalization(inputs, axes, epsilon, num_groups, compute_precision):
    """y = (x - mean) / sqrt(var + eps) * scale + bias, mean/var over ``axes`` (biased
    variance); with num_groups > 1 the channel dim 1 is split into groups first."""
    x, scale, bias = inputs
    dims = axes_from_mask(axes, x.dim())
    xf = x.float()
    if num_groups > 1:
        # Group normalization: scale and bias are per group, shaped [1, G, 1, ...].
        g = xf.reshape(x.shape[0], num_groups, -1)
        mean = g.mean(-1, keepdim=True)
        var = g.var(-1, unbiased=False, keepdim=True)
        y = (g - mean) / torch.sqrt(var + epsilon)
        y = y * scale.float().reshape(1, num_groups, 1) + bias.float().reshape(1, num_groups, 1)
        return (y.reshape(x.shape).to(x.dtype),)
    mean = xf.mean(dims, keepdim=True)
    var = xf.var(dims, unbiased=False, keepdim=True)
    y = (xf - mean) / torch.sqrt(var + epsilon)
    return ((y * scale.float() + bias.float()).to(x.dtype),)


@reference_layer("PARAMETRIC_RELU", "IParametricReLULayer")
def parametric_relu(inputs):
    x, slope = inputs
    return (torch.where(x >= 0, x, x * slope),)


@reference_layer("RESIZE", "IResizeLayer",
                 attrs=("shape", "scales", "resize_mode", "coordinate_transformation",
                        "nearest_rounding", "selector_for_single_pixel", "cubic_coeff",
                        "exclude_outside"))
def resize(inputs, shape, scales, resize_mode, coordinate_transformation, nearest_rounding,
           selector_for_single_pixel, cubic_coeff, exclude_outside):
    """Output dims from ``shape`` (or input 1), else floor(in * scale). NEAREST maps each
    output index by the coordinate transformation with the ratio in/out, rounds, and
    clamps; LINEAR (HALF_PIXEL or ALIGN_CORNERS) and CUBIC resize the innermost dims that
    change, like torch's interpolate with the same output size."""
    x = inputs[0]
    if len(inputs) > 1 and inputs[1] is not None:
        shape = [int(d) for d in inputs[1].tolist()]
    if not shape and scales:
        shape = [int(math.floor(s * d)) for s, d in zip(scales, x.shape)]
    if resize_mode == "NEAREST":
        for d, out in enumerate(shape):
            if out != x.shape[d]:
                index = _nearest_index(x.shape[d], out, coordinate_transformation,
                                       nearest_rounding, selector_for_single_pixel)
                x = x.index_select(d, index.to(x.device))
        return (x,)
    first = next(d for d, (a, b) in enumerate(zip(x.shape, shape)) if a != b) \
        if list(x.shape) != list(shape) else len(shape) - 1
    if resize_mode == "CUBIC":  # always over the innermost two dims
        first = min(first, len(shape) - 2)
    if list(shape[:first]) != list(x.shape[:first]) or len(shape) - first > 3:
        raise NotImplementedError(f"resize of dims {first}.. of {tuple(x.shape)}")
    if resize_mode == "CUBIC" and (cubic_coeff != -0.75 or exclude_outside):
        raise NotImplementedError("cubic resize other than torch's (A=-0.75, edge clamp)")
    if coordinate_transformation not in ("HALF_PIXEL", "ALIGN_CORNERS"):
        raise NotImplementedError(f"{resize_mode} resize with {coordinate_transformation}")
    spatial = list(shape[first:])
    lead = x.shape[:first]
    flat = x.reshape((1, -1) + tuple(x.shape[first:]))  # interpolate wants (N, C, ...)
    mode = {"LINEAR": {1: "linear", 2: "bilinear", 3: "trilinear"},
            "CUBIC": {2: "bicubic"}}[resize_mode][len(spatial)]
    out = F.interpolate(flat.float(), size=spatial, mode=mode,
                        align_corners=coordinate_transformation == "ALIGN_CORNERS")
    return (out.to(x.dtype).reshape(tuple(lead) + tuple(spatial)),)


def _nearest_index(n: int, out: int, transform: str, rounding: str, selector: str):
    """Input index of every output index along one dim (TensorRT's Resize formulas)."""
    dst = torch.arange(out, dtype=torch.float32)
    if out == 1 and selector == "UPPER":
        return torch.zeros(1, dtype=torch.long)
    if transform == "ALIGN_CORNERS":
        src = dst * ((n - 1) / (out - 1) if out > 1 else 0.0)
    elif transform == "HALF_PIXEL":
        src = (dst + 0.5) * (n / out) - 0.5
    else:  # ASYMMETRIC
        src = dst * torch.tensor(n / out, dtype=torch.float32)
    rounded = {"FLOOR": torch.floor, "CEIL": torch.ceil,
               "HALF_UP": lambda v: torch.floor(v + 0.5),
               "HALF_DOWN": lambda v: torch.ceil(v - 0.5)}[rounding](src)
    return rounded.long().clamp(0, n - 1)
