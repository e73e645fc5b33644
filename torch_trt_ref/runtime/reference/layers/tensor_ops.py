"""Reference semantics of TensorRT's data-movement layers: constant, identity, cast,
shuffle, squeeze, unsqueeze, shape, concatenation, slice, gather, select, fill, padding,
assertion."""

from __future__ import annotations

import math
import zlib

import torch

from ..registry import reference_layer
from .common import DTYPES_BY_NAME, capturing, trim
from .quantize_ops import cast_to


@reference_layer("CONSTANT", "IConstantLayer", attrs=("shape",), weights=("weights",))
def constant(inputs, shape, weights):
    """The weights, reshaped to the layer's shape.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Constant.html"""
    return (weights.reshape(shape),)


@reference_layer("IDENTITY", "IIdentityLayer")
def identity(inputs):
    """The input unchanged (a cast within one type).
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Identity.html"""
    return (inputs[0],)


# Note [Cast rounding]: TensorRT's cast from floating point to integer truncates toward
# zero, like torch's .to(); bool is true for any non-zero value. A cast from or to FP8, FP4,
# INT4 or E8M0 is rejected by TensorRT's builder: Note [Low-precision cast] (quantize_ops.py).
@reference_layer("CAST", "ICastLayer", attrs=("to_type",))
def cast(inputs, to_type):
    return (cast_to(inputs[0], to_type),)


@reference_layer("SHUFFLE", "IShuffleLayer",
                 attrs=("first_transpose", "reshape_dims", "second_transpose",
                        "zero_is_placeholder"))
def shuffle(inputs, first_transpose, reshape_dims, second_transpose, zero_is_placeholder):
    """transpose(first) -> reshape (static dims, or the shape tensor of input 1; 0 copies
    the input dim when zero_is_placeholder) -> transpose(second).
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Shuffle.html"""
    x = inputs[0]
    x = _permuted(x, first_transpose)
    dims = None
    if len(inputs) > 1 and inputs[1] is not None:
        dims = [int(d) for d in inputs[1].tolist()]
    elif reshape_dims is not None:
        dims = list(reshape_dims)
    if dims is not None:
        if zero_is_placeholder:
            dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
        x = x.reshape(dims)
    return (_permuted(x, second_transpose),)


def _permuted(x, perm):
    """``x`` permuted by ``perm``'s first ``x.dim()`` entries (itself for the identity: one
    view op fewer per call, two for most shuffles, which only reshape)."""
    order = trim(perm, x.dim())
    return x if order == list(range(x.dim())) else x.permute(order)


def _axes(tensor, rank: int) -> list[int]:
    """The axes shape tensor of squeeze/unsqueeze, negative values counted from ``rank``."""
    return sorted(int(a) % rank for a in tensor.reshape(-1).tolist())


@reference_layer("SQUEEZE", "ISqueezeLayer")
def squeeze(inputs):
    """Removes the unit dims listed in input 1 (values in [-r, r-1]); without axes, every
    dim of size 1. TensorRT removes only the dims that are statically 1 and requires the
    dynamic ones not to be 1 at run time, so both readings agree on valid inputs.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/python-api/infer/Graph/Layers.html#isqueezelayer"""
    x = inputs[0]
    if len(inputs) < 2 or inputs[1] is None:
        return (x.reshape([n for n in x.shape if n != 1]),)
    axes = _axes(inputs[1], x.dim())
    if any(x.shape[a] != 1 for a in axes):
        raise ValueError(f"squeeze of non-unit dims {axes} of shape {tuple(x.shape)}")
    return (x.reshape([n for d, n in enumerate(x.shape) if d not in axes]),)


@reference_layer("UNSQUEEZE", "IUnsqueezeLayer")
def unsqueeze(inputs):
    """Inserts unit dims at the positions of input 1 in the output, whose rank is
    rank(input) + len(axes); axes are in [-r_out, r_out - 1].
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/python-api/infer/Graph/Layers.html#iunsqueezelayer"""
    x, count = inputs[0], inputs[1].numel()
    axes = set(_axes(inputs[1], x.dim() + count))
    dims = iter(x.shape)
    return (x.reshape([1 if d in axes else next(dims) for d in range(x.dim() + count)]),)


@reference_layer("SHAPE", "IShapeLayer")
def shape(inputs):
    """The input's dims as an int64 vector.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Shape.html"""
    return (torch.tensor(inputs[0].shape, dtype=torch.int64, device=inputs[0].device),)


@reference_layer("CONCATENATION", "IConcatenationLayer", attrs=("axis",))
def concatenation(inputs, axis):
    """The inputs joined along ``axis``; the other dims must agree.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Concatenation.html"""
    return (torch.cat(inputs, dim=axis),)


def _slice_indices(size: int, start: int, count: int, step: int, mode: str, device):
    idx = start + torch.arange(count, device=device) * step
    if mode == "WRAP":
        return idx % size, None
    if mode == "CLAMP":
        return idx.clamp(0, size - 1), None
    if mode == "REFLECT":
        period = 2 * (size - 1) if size > 1 else 1
        idx = idx.abs() % period
        return torch.where(idx >= size, period - idx, idx), None
    valid = (idx >= 0) & (idx < size)
    # indices are linear in i: both ends in range means all are (decided on the host)
    if mode == "STRICT_BOUNDS" and count and not all(
            0 <= start + k * step < size for k in (0, count - 1)):
        raise IndexError(f"slice reads out of bounds: start={start} step={step} size={size}")
    return idx.clamp(0, max(size - 1, 0)), valid


@reference_layer("SLICE", "ISliceLayer", attrs=("start", "shape", "stride", "mode", "axes"))
def slice_(inputs, start, shape, stride, mode, axes=None):
    """out[i] = in[start + i * stride] per dim, out-of-bounds coordinates handled by the
    SampleMode (STRICT_BOUNDS error, WRAP, CLAMP, FILL with input 4, REFLECT). Inputs 1, 2,
    3, 5 override start, size, stride, axes. With axes (static or input 5) start/size/stride
    list only those dims; the others keep start 0, their full extent and stride 1.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/python-api/infer/Graph/Layers.html#islicelayer"""
    x = inputs[0]
    extra = list(inputs[1:]) + [None] * (6 - len(inputs))
    if extra[4] is not None:
        axes = extra[4].tolist()
    axes = [a % x.dim() for a in axes] if axes is not None else list(range(x.dim()))

    def full(tensor, static, default):
        values = tensor.tolist() if tensor is not None else static
        out = list(default)
        for a, v in zip(axes, values if values is not None else []):
            out[a] = int(v)
        return out

    start = full(extra[0], start, [0] * x.dim())
    size = full(extra[1], shape, list(x.shape))
    step = full(extra[2], stride, [1] * x.dim())
    fill = extra[3]
    for d in range(x.dim()):
        if x.shape[d] == 0:
            x = x.new_zeros(x.shape[:d] + (size[d],) + x.shape[d + 1:])
            continue
        idx, valid = _slice_indices(x.shape[d], start[d], size[d], step[d], mode, x.device)
        x = x.index_select(d, idx)
        if mode == "FILL" and valid is not None and not bool(valid.all()):
            mask_shape = [1] * x.dim()
            mask_shape[d] = -1
            value = fill.reshape(()) if fill is not None else torch.zeros((), dtype=x.dtype)
            x = torch.where(valid.reshape(mask_shape), x, value.to(x.dtype))
    return (x,)


# Note [Negative gather indices]: TensorRT's Gather page asks for indices in [0, n). Yet the
# TensorRT ONNX parser passes ONNX's negative indices (Gather, GatherElements, ScatterElements
# with indices in [-n, n)) to IGatherLayer / IScatterLayer unchanged and relies on the layer
# to count them from the end, so we do too; an index outside [-n, n) is an error here.
def wrap_indices(indices, size: int, what: str = "gather"):
    # The range check reads the indices on the host, which a CUDA graph capture forbids:
    # captured runs skip it (the uncaptured warm-up run before each capture checks).
    if indices.numel() and not capturing() and (
            bool((indices < -size).any()) or bool((indices >= size).any())):
        raise IndexError(f"{what} index out of range [-{size}, {size})")
    return torch.where(indices < 0, indices + size, indices)


def _gather_default(data, indices, axis: int, nb: int):
    """out[b.., i.., rest] = data[b.., .., indices[b.., i..], ..] for nb leading
    elementwise dims (broadcast between data and indices; nb is 0 or 1)."""
    if nb == 0:
        indices = wrap_indices(indices, data.shape[axis])
        out = data.index_select(axis, indices.reshape(-1))
        return out.reshape(data.shape[:axis] + indices.shape + data.shape[axis + 1:])
    batch = max(data.shape[0], indices.shape[0])
    data = data.expand(batch, *data.shape[1:])
    indices = indices.expand(batch, *indices.shape[1:])
    outs = [_gather_default(data[b], indices[b], axis - 1, 0) for b in range(batch)]
    each = data.shape[1:axis] + indices.shape[1:] + data.shape[axis + 1:]
    return torch.stack(outs) if outs else data.new_empty((0, *each))


def _gather_nd(data, indices, nb: int):
    """out[b.., i..] = data[b.., indices[b.., i.., 0], .., indices[b.., i.., k-1]]."""
    k = indices.shape[-1]
    indices = torch.stack([wrap_indices(indices[..., d], data.shape[nb + d])
                           for d in range(k)], -1) if k else indices
    batch = data.shape[:nb]
    n = math.prod(batch)  # explicit: -1 is ambiguous for empty tensors
    flat_idx = indices.reshape(n, *indices.shape[nb:])
    flat_data = data.reshape(n, *data.shape[nb:])
    outs = [flat_data[b][tuple(flat_idx[b][..., i] for i in range(k))] for b in range(n)]
    each = tuple(indices.shape[nb:-1]) + tuple(data.shape[nb + k:])
    out = torch.stack(outs) if outs else data.new_empty((0, *each))
    return out.reshape(*batch, *out.shape[1:])


@reference_layer("GATHER", "IGatherLayer", attrs=("axis", "mode", "num_elementwise_dims"))
def gather(inputs, axis, mode, num_elementwise_dims):
    """DEFAULT (ONNX Gather; axis counts every data dim and lies in [nb, rank)), ELEMENT
    (ONNX GatherElements, like torch.gather) and ND (ONNX GatherND with nb batch dims).
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Gather.html"""
    data, indices = inputs[0], inputs[1].long()
    if mode == "ELEMENT":
        return (torch.gather(data, axis, wrap_indices(indices, data.shape[axis])),)
    if mode == "ND":
        return (_gather_nd(data, indices, num_elementwise_dims),)
    return (_gather_default(data, indices, axis, num_elementwise_dims),)


@reference_layer("SELECT", "ISelectLayer")
def select(inputs):
    """condition ? then : else, elementwise with broadcasting.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Select.html"""
    return (torch.where(inputs[0], inputs[1], inputs[2]),)


def _fill_scalar(tensor, static):
    """alpha or beta: input 1/2 when present, else the attribute (an int when TensorRT
    holds it as int64, else a float)."""
    if tensor is None:
        return static
    values = tensor.reshape(-1).tolist()
    return values if len(values) > 1 else values[0]


def _linspace(dims, start, deltas, dtype):
    """out[i...] = start + sum_d i_d * deltas[d]; exact int64 when every term is an int."""
    exact = not dtype.is_floating_point and all(
        isinstance(v, int) for v in [start, *deltas])
    work = torch.int64 if exact else torch.float64
    out = torch.full(dims, start, dtype=work)
    for d, delta in enumerate(deltas[: len(dims)]):
        shape_d = [1] * len(dims)
        shape_d[d] = dims[d]
        out = out + torch.arange(dims[d], dtype=work).reshape(shape_d) * delta
    return out.to(dtype)


# Note [Random fill seed]: TensorRT documents no seed for RANDOM_UNIFORM / RANDOM_NORMAL, so
# its values cannot be matched bit for bit; only the distribution is TensorRT's. The
# reference draws from a torch.Generator seeded with zlib.crc32 of the layer name: a network
# gives the same values on every run (on any device: the draw is on CPU), and two fill
# layers (distinct names) draw independent streams.
def _random(dims, operation, low_or_mean, high_or_std, dtype, name):
    generator = torch.Generator().manual_seed(zlib.crc32((name or "").encode()))
    if operation == "RANDOM_UNIFORM":
        unit = torch.rand(dims, generator=generator, dtype=torch.float64)
        out = low_or_mean + unit * (high_or_std - low_or_mean)
    else:
        out = low_or_mean + high_or_std * torch.randn(dims, generator=generator,
                                                       dtype=torch.float64)
    return out.to(dtype)


@reference_layer("FILL", "IFillLayer", attrs=("shape", "operation", "alpha", "beta",
                                              "to_type", "name"))
def fill(inputs, shape, operation, alpha, beta, to_type, name=None):
    """LINSPACE: out[i...] = alpha + sum_d(i_d * beta_d) (a static beta b is [b]);
    RANDOM_UNIFORM: uniform in [alpha, beta); RANDOM_NORMAL: normal with mean alpha and
    standard deviation beta. Inputs 0/1/2 override shape/alpha/beta.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Fill.html"""
    extra = list(inputs) + [None] * (3 - len(inputs))
    dims = [int(d) for d in extra[0].tolist()] if extra[0] is not None else list(shape)
    dtype = DTYPES_BY_NAME[to_type]
    start = _fill_scalar(extra[1], alpha)
    second = _fill_scalar(extra[2], beta)
    device = next((t.device for t in inputs if t is not None), torch.device("cpu"))
    if operation == "LINSPACE":
        deltas = list(second) if isinstance(second, (list, tuple)) else [second]
        return (_linspace(dims, start, deltas, dtype).to(device),)
    return (_random(dims, operation, float(start), float(second), dtype, name).to(device),)


@reference_layer("PADDING", "IPaddingLayer", attrs=("pre_padding_nd", "post_padding_nd"))
def padding(inputs, pre_padding_nd, post_padding_nd):
    """Zero padding of the innermost len(pre) dims; negative values crop.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Padding.html"""
    x = inputs[0]
    pads = []
    for pre, post in reversed(list(zip(pre_padding_nd, post_padding_nd))):
        pads += [pre, post]
    return (torch.nn.functional.pad(x, pads),)


@reference_layer("ASSERTION", "IAssertionLayer", attrs=("message",))
def assertion(inputs, message):
    """Fails the run with the layer's message when any element of the bool condition is
    false; has no output.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/c-api/classnvinfer1_1_1_i_assertion_layer.html"""
    if not bool(inputs[0].all()):
        raise AssertionError(f"TensorRT assertion failed: {message}")
    return ()
