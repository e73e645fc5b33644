"""Reference semantics of TensorRT's scatter and data-dependent index layers: scatter
(ELEMENT and ND modes) and non-zero."""

from __future__ import annotations

import torch

from ..registry import reference_layer
from .common import DTYPES_BY_NAME


def _check_range(indices: torch.Tensor, size: int, what: str) -> None:
    # Note [Scatter indices]: TensorRT documents indices in [0, n); it does not wrap
    # negative ones, so any index outside [0, n) is an error here.
    if indices.numel() and (bool((indices < 0).any()) or bool((indices >= size).any())):
        raise IndexError(f"{what} index out of range [0, {size})")


@reference_layer("SCATTER", "IScatterLayer", attrs=("mode", "axis"))
def scatter(inputs, mode, axis):
    """Copy of data with elements (ELEMENT: data[.., idx[i], ..] = updates[i] along axis,
    like torch.scatter) or slices (ND: data[idx[b]] = updates[b] for each index tuple in
    the last dim of indices) replaced. Duplicate indices leave the winner unspecified."""
    data, indices, updates = inputs[0], inputs[1].long(), inputs[2]
    out = data.clone()
    if mode == "ELEMENT":
        _check_range(indices, data.shape[axis], "scatter")
        return (out.scatter_(axis, indices, updates),)
    k = indices.shape[-1]
    tuples = indices.reshape(-1, k)
    for d in range(k):
        _check_range(tuples[:, d], data.shape[d], "scatter ND")
    out[tuple(tuples.t())] = updates.reshape(-1, *data.shape[k:])
    return (out,)


@reference_layer("NON_ZERO", "INonZeroLayer", attrs=("indices_type",))
def non_zero(inputs, indices_type="INT32"):
    """Indices of the non-zero (true) elements as a [rank, count] matrix, row-major
    order; the count is data-dependent."""
    x = inputs[0]
    out = torch.nonzero(x).t().contiguous()
    return (out.to(DTYPES_BY_NAME[indices_type or "INT32"]),)
