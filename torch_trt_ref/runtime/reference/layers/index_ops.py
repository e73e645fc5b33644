"""Reference semantics of TensorRT's scatter and index layers: scatter (ELEMENT and ND
modes), non-zero, one-hot and reverse-sequence."""

from __future__ import annotations

import math

import torch

from ..registry import reference_layer
from .common import DTYPES_BY_NAME
from .tensor_ops import wrap_indices


@reference_layer("SCATTER", "IScatterLayer", attrs=("mode", "axis"))
def scatter(inputs, mode, axis):
    """Copy of data with elements (ELEMENT: data[.., idx[i], ..] = updates[i] along axis,
    like torch.scatter) or slices (ND: data[idx[b]] = updates[b] for each index tuple in
    the last dim of indices) replaced. Duplicate indices leave the winner unspecified;
    tensorrt_rtx's IScatterLayer has no reduction option (mode and axis only). Negative
    indices count from the end: Note [Negative gather indices] (tensor_ops.py).
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/Scatter.html"""
    data, indices, updates = inputs[0], inputs[1].long(), inputs[2]
    out = data.clone()
    if mode == "ELEMENT":
        indices = wrap_indices(indices, data.shape[axis], "scatter")
        return (out.scatter_(axis, indices, updates),)
    # sizes spelled out, never -1: with a zero-size dim a -1 is ambiguous and torch refuses
    k, n = indices.shape[-1], math.prod(indices.shape[:-1])
    slices = updates.reshape(n, *data.shape[k:])
    if k == 0:  # each empty index tuple names the whole tensor: the last update wins
        return (slices[-1].clone() if n else out,)
    tuples = indices.reshape(n, k)
    tuples = torch.stack([wrap_indices(tuples[:, d], data.shape[d], "scatter ND")
                          for d in range(k)], -1)
    out[tuple(tuples.t())] = slices
    return (out,)


@reference_layer("NON_ZERO", "INonZeroLayer", attrs=("indices_type",))
def non_zero(inputs, indices_type="INT32"):
    """Indices of the non-zero (true) elements as a [rank, count] matrix, row-major
    order; the count is data-dependent.
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/NonZero.html"""
    x = inputs[0]
    out = torch.nonzero(x).t().contiguous()
    return (out.to(DTYPES_BY_NAME[indices_type or "INT32"]),)


# Note [One-hot indices]: TensorRT's page does not say what an index outside [0, depth)
# does. Its ONNX parser maps ONNX OneHot onto this layer, so we follow ONNX: an index in
# [-depth, -1] counts from the end, any other out-of-range index gives an all-off row.
@reference_layer("ONE_HOT", "IOneHotLayer", attrs=("axis",))
def one_hot(inputs, axis):
    """out = off_value everywhere, on_value where the new axis's coordinate equals the
    index; the encoding dim (size depth, input 2) is inserted at ``axis`` of the output
    (in [-rank-1, rank]); the output has the type of values = [off, on] (input 1).
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/operators/OneHot.html"""
    indices, values, depth = inputs[0].long(), inputs[1], int(inputs[2].reshape(()))
    indices = torch.where(indices < 0, indices + depth, indices)
    classes = torch.arange(depth, device=indices.device)
    hot = indices.unsqueeze(-1) == classes  # [..., depth], all false out of range
    axis = axis % (indices.dim() + 1)
    hot = hot.movedim(-1, axis)
    return (torch.where(hot, values[1], values[0]),)


@reference_layer("REVERSE_SEQUENCE", "IReverseSequenceLayer",
                 attrs=("batch_axis", "sequence_axis"))
def reverse_sequence(inputs, batch_axis, sequence_axis):
    """For the i-th slice along batch_axis, the first lengths[i] elements along
    sequence_axis are reversed and the rest kept (input 1: lengths, one per batch entry).
    https://docs.nvidia.com/deeplearning/tensorrt/latest/_static/c-api/classnvinfer1_1_1_i_reverse_sequence_layer.html"""
    x, lengths = inputs[0], inputs[1].long()
    steps = x.shape[sequence_axis]
    pos = torch.arange(steps, device=x.device)
    lens = lengths.reshape(-1, 1)  # [batch, 1] against pos [steps]
    src = torch.where(pos < lens, lens - 1 - pos, pos)  # [batch, steps]
    shape = [1] * x.dim()
    shape[batch_axis], shape[sequence_axis] = src.shape[0], steps
    if batch_axis > sequence_axis:
        src = src.t()
    index = src.reshape(shape).expand(x.shape)
    return (torch.gather(x, sequence_axis, index),)
