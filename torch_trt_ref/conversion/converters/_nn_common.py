"""Small helpers shared by the neural-network converters (convolution, pooling,
normalization, matmul, resize): argument access in validators, rank changes, static dims."""

from __future__ import annotations

import operator
from typing import Any, Optional

import torch
from torch.fx import Node

from ..._trt import trt
from .. import helpers
from ..registry import normalize_arguments

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def node_args(node: Node) -> dict[str, Any]:
    """The node's ATen arguments by schema name (``self`` stays ``self``), defaults applied;
    tensor arguments are fx Nodes."""
    _, kwargs = normalize_arguments(node.target, node.args, node.kwargs)
    return kwargs


def meta(value: Any) -> Any:
    """The FakeTensor of a Node argument (or the value itself)."""
    return value.meta.get("val") if isinstance(value, Node) else value


def is_static(dims) -> bool:
    return all(isinstance(d, int) for d in dims)


def float_only(node: Node, what: str) -> Optional[str]:
    """Reason string when the node's first input is not fp32/fp16/bf16."""
    x = meta(node.all_input_nodes[0]) if node.all_input_nodes else None
    if not isinstance(x, torch.Tensor) or x.dtype not in FLOAT_DTYPES:
        dtype = getattr(x, "dtype", None)
        return f"TensorRT {what} takes fp32/fp16/bf16 inputs only (got {dtype})"
    return None


def extra_outputs_used(node: Node, first_extra: int = 1) -> list[int]:
    """Indices >= ``first_extra`` of a tuple-returning node that some getitem reads."""
    if not isinstance(node.meta.get("val"), (tuple, list)):
        return []
    used = []
    for user in node.users:
        if user.target is not operator.getitem:
            return [-1]  # the tuple itself escapes: assume everything is used
        if user.args[1] >= first_extra and user.users:
            used.append(user.args[1])
    return sorted(used)


def add_leading_one(ctx, x):
    return helpers.insert_ones(ctx, x, 0)


def drop_dim(ctx, x, dim: int):
    """Remove size-1 dim ``dim`` of ``x`` (dynamic dims are kept via the runtime shape)."""
    rank = len(x.shape)
    dim = helpers.normalize_dim(dim, rank)
    dims = [helpers.dim_size(ctx, x, d) for d in range(rank) if d != dim]
    return helpers.reshape(ctx, x, dims)


def reshape_like(ctx, x, like):
    """Reshape ``x`` to the runtime shape of ``like``."""
    if is_static(like.shape) and all(d >= 0 for d in like.shape):
        return helpers.reshape(ctx, x, list(like.shape))
    shape = helpers.shape_of(ctx, like)  # before the shuffle: layers in topological order
    layer = ctx.net.add_shuffle(x)
    layer.set_input(1, shape)
    return ctx.name_layer(layer, "reshape_like").get_output(0)


def channel_view(value: torch.Tensor, rank: int) -> torch.Tensor:
    """A per-channel vector (C,) as (1, C, 1, ...) of ``rank`` dims, for broadcasting."""
    return value.reshape((1, -1) + (1,) * (rank - 2))


def channel_itensor(ctx, value, rank: int, dtype: torch.dtype):
    """A per-channel vector (torch tensor or ITensor) as a (1, C, 1, ...) ITensor."""
    if isinstance(value, torch.Tensor):
        return helpers.itensor(ctx, channel_view(value, rank), dtype)
    value = helpers.cast(ctx, value, dtype)
    return helpers.reshape(ctx, value, [1, value.shape[0]] + [1] * (rank - 2))


def positions(ctx, length):
    """0, 1, ..., length - 1 as an int64 ITensor; ``length`` is an int or a 1-element int64
    ITensor (a runtime size)."""
    if not helpers.is_tensor(length):
        return helpers.itensor(ctx, torch.arange(length, dtype=torch.int64))
    fill = ctx.net.add_fill((1,), trt.FillOperation.LINSPACE, trt.int64)
    fill.set_input(0, length)
    fill.alpha, fill.beta = 0, 1
    return ctx.name_layer(fill, "positions").get_output(0)
