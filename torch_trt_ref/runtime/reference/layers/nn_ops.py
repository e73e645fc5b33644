"""Reference semantics of TensorRT's neural-network layers: convolution, deconvolution,
pooling (every PaddingMode and PoolingType), normalization, LRN, parametric ReLU."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..registry import reference_layer
from .common import DTYPES_BY_NAME, axes_from_mask

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


# Note [PaddingMode]: TensorRT's PaddingMode (nvinfer1::PaddingMode, and the "padding_mode"
# of the Convolution / Pooling operator pages) fixes, per spatial dim, the pre padding B,
# the post padding A and the output size O from the input size I, stride S and the dilated
# kernel DK = 1 + D * (F - 1), with M = I + B + A:
#   EXPLICIT_ROUND_DOWN  O = floor((M - DK) / S) + 1        (B, A as given)
#   EXPLICIT_ROUND_UP    O = ceil((M - DK) / S) + 1         (B, A as given)
#   SAME_UPPER           O = ceil(I / S), P = floor((I - 1) / S) * S + DK - I,
#                        B = floor(P / 2), A = P - B
#   SAME_LOWER           same P, A = floor(P / 2), B = P - A
# The SAME modes override pre/post padding. With ROUND_UP the last window may reach past
# the padded input; that part is not input and not padding (it never counts in averages).


def _same_padding(i: int, s: int, dk: int, upper: bool) -> tuple[int, int]:
    p = max((i - 1) // s * s + dk - i, 0)
    small, big = p // 2, p - p // 2
    return (small, big) if upper else (big, small)


def _window_geometry(mode, sizes, kernel, stride, dilation, pre, post):
    """Per spatial dim (B, A, O) for a convolution or pooling window (Note [PaddingMode])."""
    mode = mode or "EXPLICIT_ROUND_DOWN"
    dims = []
    for i, f, s, d, b, a in zip(sizes, kernel, stride, dilation, pre, post):
        dk = 1 + d * (f - 1)
        if mode.startswith("SAME"):
            b, a = _same_padding(i, s, dk, mode == "SAME_UPPER")
            o = -(-i // s)
        elif mode == "EXPLICIT_ROUND_UP":
            o = -(-(i + b + a - dk) // s) + 1
        else:
            o = (i + b + a - dk) // s + 1
        dims.append((b, a, o))
    return dims


def _pad_for_windows(x, dims, kernel, stride, dilation, value):
    """Pads the innermost len(dims) dims by B in front and, at the back, to exactly what O
    windows read (A, plus any ROUND_UP overhang, minus rows no window reads). Rows no window
    reads are cropped after padding: they may be more than the input holds (a stride larger
    than input plus padding), which one ``F.pad`` with a negative back pad cannot crop, as
    it crops the unpadded input first."""
    pads, needs = [], []
    for k, ((b, _a, o), f, s, d) in enumerate(zip(dims, kernel, stride, dilation)):
        size = x.shape[x.dim() - len(dims) + k]
        needs.append((o - 1) * s + 1 + d * (f - 1))
        pads.append((b, max(needs[-1] - b - size, 0)))
    flat = [p for pair in reversed(pads) for p in pair]
    x = F.pad(x, flat, value=value) if any(flat) else x
    for k, needed in enumerate(needs):
        x = x.narrow(x.dim() - len(dims) + k, 0, needed)
    return x


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
        return inputs[2].reshape(-1)
    return bias


@reference_layer("CONVOLUTION", "IConvolutionLayer", attrs=_CONV_ATTRS,
                 weights=("kernel", "bias"))
def convolution(inputs, num_output_maps, kernel_size_nd, stride_nd, dilation_nd, num_groups,
                pre_padding, post_padding, padding_mode, kernel, bias):
    """Cross-correlation over the innermost len(kernel_size) dims (IConvolutionLayer) with
    groups, dilation, and padding by padding_mode (Note [PaddingMode]); padding is zeros."""
    x = inputs[0]
    nd = len(kernel_size_nd)
    w = _kernel(inputs, kernel, num_output_maps, x.shape[1], num_groups, kernel_size_nd, False)
    dims = _window_geometry(padding_mode, x.shape[-nd:], kernel_size_nd, stride_nd,
                            dilation_nd, pre_padding, post_padding)
    if nd == 2 and x.is_cuda:  # cuDNN's convolutions run NHWC: keep activations that way
        x, w = x.contiguous(memory_format=torch.channels_last), \
            w.contiguous(memory_format=torch.channels_last)
    padding = _symmetric(x, dims, kernel_size_nd, stride_nd, dilation_nd)
    if padding is None:  # uneven padding: pad first (one more pass over x)
        x, padding = _pad_for_windows(x, dims, kernel_size_nd, stride_nd, dilation_nd, 0.0), 0
    return (_CONV[nd](x, w.to(x.dtype), _bias(inputs, bias), stride_nd, padding, dilation_nd,
                      num_groups),)


def _symmetric(x, dims, kernel, stride, dilation) -> tuple[int, ...] | None:
    """The per-dim padding when ``_pad_for_windows`` would pad each dim equally in front
    and at the back (then torch's conv pads with zeros itself, the same values); else None."""
    pads = []
    for k, ((b, _a, o), f, s, d) in enumerate(zip(dims, kernel, stride, dilation)):
        size = x.shape[x.dim() - len(dims) + k]
        if (o - 1) * s + 1 + d * (f - 1) - b - size != b or b < 0:
            return None
        pads.append(b)
    return tuple(pads)


def _deconv_crop(mode, kernel, stride, dilation, pre, post):
    """(B, A) removed from the full transposed-convolution output of each spatial dim: the
    given padding in the EXPLICIT modes; in the SAME modes P = max(DK - S, 0), split as in
    Note [PaddingMode] (TensorRT's Deconvolution operator page: O = min(I*S, (I-1)*S + DK))."""
    if not (mode or "").startswith("SAME"):
        return list(zip(pre, post))
    crops = []
    for f, s, d in zip(kernel, stride, dilation):
        p = max(1 + d * (f - 1) - s, 0)
        small, big = p // 2, p - p // 2
        crops.append((small, big) if mode == "SAME_UPPER" else (big, small))
    return crops


@reference_layer("DECONVOLUTION", "IDeconvolutionLayer", attrs=_CONV_ATTRS,
                 weights=("kernel", "bias"))
def deconvolution(inputs, num_output_maps, kernel_size_nd, stride_nd, dilation_nd, num_groups,
                  pre_padding, post_padding, padding_mode, kernel, bias):
    """Transposed convolution (IDeconvolutionLayer): the full output (I - 1) * S + DK per
    dim, then B rows cropped in front and A at the back (O = (I - 1) * S + DK - (B + A))."""
    x = inputs[0]
    nd = len(kernel_size_nd)
    w = _kernel(inputs, kernel, num_output_maps, x.shape[1], num_groups, kernel_size_nd, True)
    out = _CONV_T[nd](x, w.to(x.dtype), _bias(inputs, bias), stride_nd, 0, 0, num_groups,
                      dilation_nd)
    crops = _deconv_crop(padding_mode, kernel_size_nd, stride_nd, dilation_nd, pre_padding,
                         post_padding)
    for i, (a, b) in enumerate(crops):
        d = out.dim() - nd + i
        out = out.narrow(d, a, out.shape[d] - a - b)
    return (out,)


def _pool3d(pool, x, kernel, stride, **kw):
    """``pool`` (a torch 3-D pooling function) over the innermost len(kernel) dims of x,
    the leading dims flattened into the batch and missing spatial dims of size 1."""
    nd = len(kernel)
    pad = (1,) * (3 - nd)
    out = pool(x.reshape((-1, 1) + pad + tuple(x.shape[-nd:])), pad + tuple(kernel),
               pad + tuple(stride), **kw)
    return out.reshape(tuple(x.shape[:-nd]) + tuple(out.shape[-nd:]))


def _window_sums(x, kernel, stride):
    return _pool3d(F.avg_pool3d, x, kernel, stride, divisor_override=1)


@reference_layer("POOLING", "IPoolingLayer",
                 attrs=("type", "window_size_nd", "stride_nd", "pre_padding", "post_padding",
                        "padding_mode", "average_count_excludes_padding", "blend_factor"))
def pooling(inputs, type, window_size_nd, stride_nd, pre_padding, post_padding, padding_mode,
            average_count_excludes_padding, blend_factor=0.0):
    """IPoolingLayer over the innermost len(window) dims with padding by padding_mode
    (Note [PaddingMode]). MAX ignores padding. AVERAGE divides a window's sum by its
    overlap with the unpadded input (average_count_excludes_padding) or with the padded
    input. MAX_AVERAGE_BLEND = (1 - blend_factor) * MAX + blend_factor * AVERAGE. A window
    holding no input (possible with EXPLICIT_ROUND_UP) gives -inf for MAX and 0 / 0 for an
    average that excludes padding: TensorRT does not document its output there."""
    x = inputs[0]
    nd = len(window_size_nd)
    ones = (1,) * nd
    dims = _window_geometry(padding_mode, x.shape[-nd:], window_size_nd, stride_nd, ones,
                            pre_padding, post_padding)
    results = {}
    if type in ("MAX", "MAX_AVERAGE_BLEND"):  # a max is exact in x's own type
        wide = x.double() if type == "MAX_AVERAGE_BLEND" else x
        xp = _pad_for_windows(wide, dims, window_size_nd, stride_nd, ones, float("-inf"))
        results["MAX"] = _pool3d(F.max_pool3d, xp, window_size_nd, stride_nd)
    if type in ("AVERAGE", "MAX_AVERAGE_BLEND"):
        xp = _pad_for_windows(x.double(), dims, window_size_nd, stride_nd, ones, 0.0)
        count = _pooling_counts(x.shape[-nd:], dims, window_size_nd, stride_nd,
                                average_count_excludes_padding)
        results["AVERAGE"] = _window_sums(xp, window_size_nd, stride_nd) / count
    if type == "MAX_AVERAGE_BLEND":
        out = (1 - blend_factor) * results["MAX"] + blend_factor * results["AVERAGE"]
    else:
        out = results[type]
    return (out.to(x.dtype),)


def _pooling_counts(sizes, dims, kernel, stride, exclude_padding: bool):
    """Per output position, the number of window elements that are input (exclude_padding)
    or input or B/A padding, found by pooling a mask laid out like the padded input."""
    mask = torch.ones(tuple(sizes), dtype=torch.float64)
    if not exclude_padding:
        pads = [p for b, a, _o in reversed(dims) for p in (b, a)]
        mask = F.pad(mask, pads, value=1.0)
        dims = [(0, 0, o) for _b, _a, o in dims]
    # Positions outside the (padded) input are 0 in the mask.
    mask = _pad_for_windows(mask, dims, kernel, stride, (1,) * len(kernel), 0.0)
    return _window_sums(mask, kernel, stride)


@reference_layer("NORMALIZATION", "INormalizationLayer",
                 attrs=("axes", "epsilon", "num_groups", "compute_precision"))
def normalization(inputs, axes, epsilon, num_groups, compute_precision):
    """INormalizationLayer: Y = (X - Mean(X, axes)) / Sqrt(Variance(X, axes) + epsilon) * S + B,
    biased variance, computed in compute_precision (float32 when unset; TensorRT-RTX has no
    such attribute). With num_groups > 1 (group normalization) the channel dim 1 is split
    into num_groups groups, each reduced together with ``axes``. Scale and bias broadcast to
    X: [1, C, 1, ...] per channel for instance and group norm (add_normalization_v2); the
    original add_normalization took group norm's per group, [1, G, 1, ...], told apart here
    by their shape."""
    x, scale, bias = inputs
    compute = DTYPES_BY_NAME.get(compute_precision, torch.float32)
    xf = x.to(compute)
    dims = axes_from_mask(axes, x.dim())
    if num_groups > 1:
        c = x.shape[1]
        g = xf.reshape((x.shape[0], num_groups, c // num_groups) + tuple(x.shape[2:]))
        gdims = [2] + [d + 1 for d in dims if d > 1]
        y = _normalize(g, gdims, epsilon).reshape(x.shape)
        if scale.dim() > 1 and scale.shape[1] == num_groups != c:  # per-group (v1) scale
            scale = scale.repeat_interleave(c // num_groups, dim=1)
            bias = bias.repeat_interleave(c // num_groups, dim=1)
    elif dims and dims == list(range(dims[0], x.dim())):  # trailing dims: one fused pass
        shape = tuple(x.shape[dims[0]:])
        if all(t.dim() >= len(shape) and tuple(t.shape[t.dim() - len(shape):]) == shape
               and t.numel() == math.prod(shape) for t in (scale, bias)):
            return (F.layer_norm(xf, shape, scale.to(compute).reshape(shape),
                                 bias.to(compute).reshape(shape), epsilon).to(x.dtype),)
        y = F.layer_norm(xf, shape, eps=epsilon)
    else:
        y = _normalize(xf, dims, epsilon)
    return ((y * scale.to(compute) + bias.to(compute)).to(x.dtype),)


def _normalize(x, dims, epsilon):
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dims, keepdim=True)
    return (x - mean) / torch.sqrt(var + epsilon)


@reference_layer("LRN", "ILRNLayer", attrs=("window_size", "alpha", "beta", "k"))
def lrn(inputs, window_size, alpha, beta, k):
    """Cross-channel local response normalization (ILRNLayer), over dim N - 3 (the channel
    dim of [.., C, H, W]):  y = x / (k + alpha / w * sum of x^2 over channels
    [c - (w - 1) / 2, c + (w - 1) / 2] clipped to the tensor) ^ beta.

    Note [LRN alpha]: TensorRT's operator page writes the sum without the 1/w factor, but
    the ONNX parser passes ONNX's alpha unchanged (checked: alpha 0.0002 of test_lrn is
    the layer's alpha) and ONNX's LRN divides alpha by size, so the layer does too (the
    cuDNN / Caffe convention)."""
    x = inputs[0]
    c_dim = x.dim() - 3
    sq = x.double().pow(2).movedim(c_dim, -1)
    half = (window_size - 1) // 2
    padded = F.pad(sq, (half, window_size - 1 - half))
    sums = padded.unfold(-1, window_size, 1).sum(-1).movedim(-1, c_dim)
    out = x.double() / (k + alpha / window_size * sums) ** beta
    return (out.to(x.dtype),)


@reference_layer("PARAMETRIC_RELU", "IParametricReLULayer")
def parametric_relu(inputs):
    x, slope = inputs
    return (torch.where(x >= 0, x, x * slope),)

