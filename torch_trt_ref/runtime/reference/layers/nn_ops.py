"""Reference semantics of TensorRT's neural-network layers: convolution, deconvolution,
pooling, normalization, resize, parametric ReLU."""

from __future__ import annotations

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
    summed = pool(xp.float(), window_size_nd, stride_nd) * float(torch.tensor(window_size_nd).prod())
    if average_count_excludes_padding:
        ones = _explicit_pad(torch.ones_like(x[:1, :1], dtype=torch.float32), pre_padding,
                             post_padding)
        count = pool(ones, window_size_nd, stride_nd) * float(torch.tensor(window_size_nd).prod())
    else:
        count = float(torch.tensor(window_size_nd).prod())
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
        n, c = x.shape[:2]
        g = xf.reshape(n, num_groups, -1)
        mean = g.mean(-1, keepdim=True)
        var = g.var(-1, unbiased=False, keepdim=True)
        y = ((g - mean) / torch.sqrt(var + epsilon)).reshape(x.shape)
    else:
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
                        "nearest_rounding", "selector_for_single_pixel", "cubic_coeff"))
def resize(inputs, shape, scales, resize_mode, coordinate_transformation, nearest_rounding,
           selector_for_single_pixel, cubic_coeff):
    """NEAREST (FLOOR rounding, ASYMMETRIC) and LINEAR/CUBIC over the innermost dims with
    ALIGN_CORNERS or HALF_PIXEL coordinates, matching torch's interpolate."""
    x = inputs[0]
    if len(inputs) > 1 and inputs[1] is not None:
        shape = [int(d) for d in inputs[1].tolist()]
    if not shape and scales:
        shape = [int(s * d) for s, d in zip(scales, x.shape)]
    spatial = [int(d) for d in shape[2:]]
    mode = {"NEAREST": "nearest", "LINEAR": {1: "linear", 2: "bilinear", 3: "trilinear"},
            "CUBIC": "bicubic"}[resize_mode]
    if isinstance(mode, dict):
        mode = mode[len(spatial)]
    kwargs = {}
    if mode != "nearest":
        kwargs["align_corners"] = coordinate_transformation == "ALIGN_CORNERS"
    return (F.interpolate(x, size=spatial, mode=mode, **kwargs),)
