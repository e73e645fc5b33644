"""ATen's reading of int-list arguments: ``stride``/``padding``/``dilation``/
``output_padding``/``kernel_size``/``output_size`` per spatial dim, and ``dim`` lists.
Converters and their validators both read arguments through here, so a validator judges
the same values the converter builds."""

from __future__ import annotations

from typing import Any, Optional, Sequence

# Note [ATen int lists]: an ``int[N]`` schema argument is given as a bare int, a one-element
# list or a full list; ATen repeats a single value over every spatial dim
# (``expand_param_if_needed`` in aten/src/ATen/native/Convolution.cpp; pooling reads
# ``kernel_size[0]`` for every dim when the list has one element, Pool.h). The FX graph
# keeps the spelling the model used, so ``F.conv2d(x, w, padding=[1])`` reaches the
# converter as ``padding=[1]`` and must mean [1, 1], never [1] for the first dim only.
# An empty pooling ``stride`` means stride = kernel_size.


def per_dim(value: Any, nd: int, name: str = "argument",
            default: Optional[Sequence[int]] = None) -> list[int]:
    """``value`` (int, or list of 1 or ``nd`` ints) as ``nd`` ints, as ATen expands it.
    None or an empty list means ``default`` (ATen: pooling stride = kernel_size); a length
    ATen rejects raises ValueError."""
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        if default is None:
            raise ValueError(f"{name} is empty")
        return per_dim(default, nd, name)
    if not isinstance(value, (list, tuple)):
        return [value] * nd
    if len(value) == 1:
        return [value[0]] * nd
    if len(value) != nd:
        raise ValueError(f"{name} has {len(value)} values for {nd} spatial dims")
    return list(value)


def conv_params(stride, padding, dilation, output_padding, nd: int) -> dict[str, list[int]]:
    """aten.convolution's stride/padding/dilation/output_padding expanded to ``nd`` dims."""
    given = {"stride": stride, "padding": padding, "dilation": dilation,
             "output_padding": output_padding}
    return {name: per_dim(value, nd, name) for name, value in given.items()}


def pool_params(kernel_size, stride, padding, dilation, nd: int) -> dict[str, list[int]]:
    """A pooling op's kernel_size/stride/padding/dilation expanded to ``nd`` dims; an empty
    stride is the kernel size."""
    kernel = per_dim(kernel_size, nd, "kernel_size")
    return {"kernel": kernel, "stride": per_dim(stride, nd, "stride", kernel),
            "padding": per_dim(padding, nd, "padding"),
            "dilation": per_dim(dilation, nd, "dilation")}


def dims(value: Any, rank: int, empty_means_all: bool = False) -> list[int]:
    """A ``dim`` argument (int or list) as sorted non-negative dims of a rank-``rank``
    tensor. With ``empty_means_all`` an empty list or None is every dim (ATen reductions:
    ``sum(x, dim=[])`` sums everything); otherwise it is no dim. A rank-0 tensor accepts
    dims 0 and -1 (ATen wraps with max(rank, 1)) and has no dim to name. A dim named twice
    raises ValueError, as in ATen."""
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        return list(range(rank)) if empty_means_all else []
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    bound = max(rank, 1)
    out = []
    for d in values:
        if not -bound <= d < bound:
            raise ValueError(f"dim {d} out of range for rank {rank}")
        out.append(d % bound)
    if len(set(out)) != len(out):
        raise ValueError(f"dim list {values} names a dim twice")
    return sorted(out) if rank else []
