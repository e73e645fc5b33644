"""Random converters: rand, randn, randint and randperm on IFillLayer's RANDOM_UNIFORM /
RANDOM_NORMAL operations, and native_dropout in eval mode (an identity and an all-true
mask). Their outputs are random: tests check distributions, never values."""

from __future__ import annotations

import torch
from torch.fx import Node

from ..._trt import to_trt_dtype, trt
from .. import dims as D
from .. import helpers
from .._trt_ops import EW, UN
from ..blocks.index import MAX_K, filled, topk_layer
from ..blocks.nodes import FLOAT_DTYPES, node_args, strided_ok
from ..registry import converter

aten = torch.ops.aten
FILL = trt.FillOperation
# RANDOM_* fills produce FLOAT or HALF (IFillLayer docs, FillOperation); bf16 is drawn in
# float32 and rounded.
FILL_DTYPES = (torch.float32, torch.float16)
# Integers up to 2**24 are exact in float32, so a float32 draw covers [low, high) evenly.
MAX_INT_RANGE = 2**24


def random_fill(ctx, size, operation, alpha: float, beta: float, dtype: torch.dtype):
    """An IFillLayer drawing ``size`` values (ints or run-time dims): RANDOM_UNIFORM between
    alpha and beta, RANDOM_NORMAL with mean alpha and standard deviation beta. Drawn in
    ``dtype`` when TensorRT can, else in float32 and cast. A rank-0 draw is one value
    reshaped to rank 0 (tensorrt_rtx's builder fails on a rank-0 random fill: "Copy
    operation '..._output_shape_concat' has 1 inputs", measured)."""
    if len(size) == 0:
        one = random_fill(ctx, [1], operation, alpha, beta, dtype)
        return helpers.reshape(ctx, one, [])
    draw = dtype if dtype in FILL_DTYPES else torch.float32
    dims = [D.as_dim(ctx, d) for d in size]
    shape = D.shape_tensor(ctx, dims) if not D.no_shape_tensors(dims) else None
    layer = ctx.net.add_fill(tuple(d if isinstance(d, int) else 1 for d in dims), operation,
                             to_trt_dtype(draw))
    if shape is not None:
        layer.set_input(0, shape)
    layer.alpha, layer.beta = alpha, beta
    out = ctx.name_layer(layer, "random").get_output(0)
    return helpers.cast(ctx, out, dtype)


def _float_out_ok(node: Node, settings) -> str | None:
    reason = strided_ok(node, settings)
    dtype = node.meta["val"].dtype
    if reason is None and dtype not in FLOAT_DTYPES:
        return f"random {dtype} values are not supported (TensorRT draws fp32/fp16)"
    return reason


# Note [rand upper bound]: TensorRT documents RANDOM_UNIFORM as random(min=alpha,
# max=beta) without saying whether beta can be drawn, and a float32 draw just below 1
# rounds to 1.0 in fp16/bf16. torch.rand is [0, 1): the converter clamps to the largest
# value below 1 of the output dtype.
def below_one(dtype: torch.dtype) -> float:
    return 1.0 - torch.finfo(dtype).eps / 2


@converter(aten.rand.default, validator=_float_out_ok, dynamic=True)
def rand(ctx, size, dtype=None, layout=None, device=None, pin_memory=None):
    dtype = ctx.out_dtype
    out = random_fill(ctx, size, FILL.RANDOM_UNIFORM, 0.0, 1.0, dtype)
    return helpers.elementwise(ctx, EW.MIN, out, below_one(dtype), dtype)


@converter(aten.randn.default, validator=_float_out_ok, dynamic=True)
def randn(ctx, size, dtype=None, layout=None, device=None, pin_memory=None):
    return random_fill(ctx, size, FILL.RANDOM_NORMAL, 0.0, 1.0, ctx.out_dtype)


def _randint_ok(node: Node, settings) -> str | None:
    args = node_args(node)
    low, high = args.get("low", 0), args["high"]
    if isinstance(low, Node) or isinstance(high, Node):
        return "symbolic randint bounds are not supported"
    if not 0 < high - low <= MAX_INT_RANGE:
        return f"randint range must hold 1 to 2**24 integers (got [{low}, {high}))"
    if node.meta["val"].dtype not in (torch.int32, torch.int64) + FILL_DTYPES:
        return f"randint to {node.meta['val'].dtype} is not supported"
    return strided_ok(node, settings)


def uniform_integers(ctx, size, low: int, high: int, dtype: torch.dtype):
    """floor(uniform[low, high)) in float32, clamped to high - 1 (Note [rand upper bound])."""
    x = random_fill(ctx, size, FILL.RANDOM_UNIFORM, float(low), float(high), torch.float32)
    x = helpers.unary(ctx, UN.FLOOR, x)
    x = helpers.elementwise(ctx, EW.MIN, x, float(high - 1), torch.float32)
    return helpers.cast(ctx, x, dtype)


@converter(aten.randint.default, validator=_randint_ok, dynamic=True)
def randint(ctx, high, size, dtype=None, layout=None, device=None, pin_memory=None):
    return uniform_integers(ctx, size, 0, high, ctx.out_dtype)


@converter(aten.randint.low, validator=_randint_ok, dynamic=True)
def randint_low(ctx, low, high, size, dtype=None, layout=None, device=None, pin_memory=None):
    return uniform_integers(ctx, size, low, high, ctx.out_dtype)


def _randperm_ok(node: Node, settings) -> str | None:
    n = node_args(node)["n"]
    if isinstance(n, Node):
        return "a symbolic randperm length is not supported (TopK's k must be known)"
    if not 1 <= n <= MAX_K:
        return f"randperm supports 1 <= n <= {MAX_K} (TopK's k limit), got {n}"
    if node.meta["val"].dtype not in (torch.int32, torch.int64) + FILL_DTYPES:
        return f"randperm to {node.meta['val'].dtype} is not supported"
    return strided_ok(node, settings)


@converter(aten.randperm.default, validator=_randperm_ok)
def randperm(ctx, n, dtype=None, layout=None, device=None, pin_memory=None):
    """The order that sorts n uniform keys: a uniformly random permutation. Tied keys
    (float32 draws) still give distinct TopK indices, so the result is a permutation."""
    keys = random_fill(ctx, [n], FILL.RANDOM_UNIFORM, 0.0, 1.0, torch.float32)
    _, order = topk_layer(ctx, keys, n, 0, largest=False)
    return helpers.cast(ctx, order, ctx.out_dtype)


def _eval_dropout_ok(node: Node, settings) -> str | None:
    args = node_args(node)
    train, p = args["train"], args["p"]
    if train is not False and p != 0:
        return "training-mode dropout is random and stays in PyTorch"
    return None


@converter(aten.native_dropout.default, validator=_eval_dropout_ok, dynamic=True)
def native_dropout(ctx, input, p, train):
    """Eval mode (``train=False``, or p == 0): the input and an all-true keep mask. The
    lowering removes the dropout when the mask is unused (docs/converters.md)."""
    mask = filled(ctx, D.dims_of(ctx, input), True, torch.bool)
    return helpers.identity(ctx, input), mask
