"""Normalization converters: inference batch norm (folded to a per-channel affine), batch
norm with batch statistics, layer norm and group norm (INormalizationLayer)."""

from __future__ import annotations

from typing import Optional

import torch

from .. import dims as D
from .. import helpers
from .._trt_ops import EW, RED, UN
from ..blocks.nodes import extra_outputs_used, fake, fake_input, float_only, node_args
from ..blocks.shape import channel_itensor, reshape_like
from ..registry import converter

aten = torch.ops.aten
# folded in torch (and refit by the weight program) when constant: _arith
_BN_WEIGHTS = ("weight", "bias", "running_mean", "running_var")
_TORCH_EW = {EW.SUM: torch.add, EW.SUB: torch.sub, EW.PROD: torch.mul, EW.DIV: torch.div}


def _arith(ctx, op, a, b):
    """``a <op> b`` in fp32: folded in torch when both are constants, else a layer."""
    if not helpers.is_tensor(a) and not helpers.is_tensor(b):
        a = a.float() if isinstance(a, torch.Tensor) else a
        b = b.float() if isinstance(b, torch.Tensor) else b
        return _TORCH_EW[op](torch.as_tensor(a, dtype=torch.float32), b)
    return helpers.elementwise(ctx, op, a, b, torch.float32)


def _rsqrt(ctx, value):
    if not helpers.is_tensor(value):
        return torch.rsqrt(value)
    return helpers.unary(ctx, UN.RECIP, helpers.unary(ctx, UN.SQRT, value))


def _no_extra_outputs(what: str, statistics: str = "saved statistics"):
    def validate(node, settings) -> Optional[str]:
        reason = float_only(node, what)
        if reason:
            return reason
        if extra_outputs_used(node):
            return f"the {statistics} outputs of {what} are not supported"
        return None

    return validate


def _bn_ok(node, settings) -> Optional[str]:
    reason = _no_extra_outputs("batch norm")(node, settings)
    if reason:
        return reason
    args = node_args(node)
    x = fake(args["input"])
    if x.dim() < 2:
        return "batch norm needs an input of rank >= 2"
    # instance norm lowers to batch statistics over (1, N * C, ...): a dynamic channel dim
    # without affine parameters
    affine = args["weight"] is not None or args["bias"] is not None
    if not isinstance(x.shape[1], int) and affine:
        return "batch norm with affine parameters needs a static channel dim"
    return None


@converter(aten._native_batch_norm_legit_no_training.default, validator=_bn_ok,
           dynamic=True, constants=_BN_WEIGHTS)
def batch_norm_inference(ctx, input, weight, bias, running_mean, running_var, momentum, eps):
    """y = x * scale + shift with scale = w / sqrt(var + eps), shift = b - mean * scale,
    folded in fp32 when the statistics are constants."""
    rank, dtype = len(input.shape), helpers.dtype_of(input)
    scale = _rsqrt(ctx, _arith(ctx, EW.SUM, running_var, eps))
    if weight is not None:
        scale = _arith(ctx, EW.PROD, scale, weight)
    shift = _arith(ctx, EW.PROD, running_mean, scale)
    shift = _arith(ctx, EW.SUB, bias if bias is not None else 0.0, shift)
    scaled = helpers.elementwise(ctx, EW.PROD, input, channel_itensor(ctx, scale, rank, dtype),
                                 dtype)
    out = helpers.elementwise(ctx, EW.SUM, scaled, channel_itensor(ctx, shift, rank, dtype),
                              dtype)
    return out, None, None


def _eval_bn_ok(node, settings) -> Optional[str]:
    args = node_args(node)
    if args["training"]:
        return "batch norm in training mode (batch statistics that update the running ones)"
    if args["running_mean"] is None or args["running_var"] is None:
        return "batch norm without running statistics"
    return _bn_ok(node, settings)


@converter(aten.native_batch_norm.default, validator=_eval_bn_ok, dynamic=True,
           constants=_BN_WEIGHTS)
def native_batch_norm(ctx, input, weight, bias, running_mean, running_var, training, momentum,
                      eps):
    """Eval mode (training=False): the running statistics, as
    ``_native_batch_norm_legit_no_training``; the saved mean/invstd outputs are unsupported."""
    return batch_norm_inference(ctx, input, weight, bias, running_mean, running_var, momentum,
                                eps)


@converter(aten.batch_norm.default, validator=_eval_bn_ok, dynamic=True,
           constants=_BN_WEIGHTS)
def batch_norm(ctx, input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled):
    """The composite batch_norm, kept with disabled_decompositions (eval mode)."""
    return batch_norm_inference(ctx, input, weight, bias, running_mean, running_var, momentum,
                                eps)[0]


def _normalize(ctx, x, scale, bias, axes: int, eps: float):
    """INormalizationLayer computed in fp32 (fp16 statistics overflow easily); a strongly
    typed network computes in its input type, so half inputs are cast around the layer."""
    f32 = torch.float32
    xf, scale, bias = (helpers.cast(ctx, v, f32) for v in (x, scale, bias))
    layer = ctx.net.add_normalization(xf, scale, bias, axes)
    layer.epsilon = eps
    out = ctx.name_layer(layer, "normalization").get_output(0)
    return helpers.cast(ctx, out, helpers.dtype_of(x))


def _affine_operand(ctx, value, default: float, shape: list, dtype):
    """weight/bias (None, constant or ITensor) as an ITensor of ``shape`` (ints, or runtime
    dims for an absent weight) for broadcasting."""
    if value is None and not D.no_shape_tensors(shape):
        one = helpers.itensor(ctx, torch.full([1] * len(shape), default, dtype=dtype))
        return D.broadcast_to(ctx, one, shape)
    if value is None:
        return helpers.itensor(ctx, torch.full(shape, default, dtype=dtype))
    if isinstance(value, torch.Tensor):
        return helpers.itensor(ctx, value.reshape(shape), dtype)
    return helpers.reshape(ctx, helpers.cast(ctx, value, dtype), shape)


@converter(aten._native_batch_norm_legit.no_stats, validator=_bn_ok, dynamic=True,
           constants=("weight", "bias"))
def batch_norm_batch_stats(ctx, input, weight, bias, training, momentum, eps):
    """Batch statistics over every dim but the channel dim 1 (instance norm lowers here)."""
    rank, dtype = len(input.shape), helpers.dtype_of(input)
    shape = [1, helpers.dim_size(ctx, input, 1)] + [1] * (rank - 2)
    scale = _affine_operand(ctx, weight, 1.0, shape, dtype)
    shift = _affine_operand(ctx, bias, 0.0, shape, dtype)
    axes = helpers.axes_mask([d for d in range(rank) if d != 1], rank)
    return _normalize(ctx, input, scale, shift, axes, eps), None, None


def _statistics(ctx, x, axes: int, eps: float, keep: bool, dtypes):
    """(mean, rstd) of ``x`` over ``axes`` in fp32, cast to the node's output dtypes."""
    def reduce_avg(value, keep_dims: bool):
        layer = ctx.net.add_reduce(value, RED.AVG, axes, keep_dims)
        return ctx.name_layer(layer, "reduce_avg").get_output(0)

    xf = helpers.cast(ctx, x, torch.float32)
    centered = helpers.elementwise(ctx, EW.SUB, xf, reduce_avg(xf, True), torch.float32)
    var = reduce_avg(helpers.elementwise(ctx, EW.PROD, centered, centered, torch.float32), keep)
    rstd = _rsqrt(ctx, helpers.elementwise(ctx, EW.SUM, var, eps, torch.float32))
    mean = reduce_avg(xf, keep)
    return helpers.cast(ctx, mean, dtypes[0]), helpers.cast(ctx, rstd, dtypes[1])


def _stat_dtypes(ctx):
    return [v.dtype for v in ctx.out_meta[1:3]]


def _layer_norm_ok(node, settings) -> Optional[str]:
    return float_only(node, "layer norm")


@converter(aten.native_layer_norm.default, validator=_layer_norm_ok, dynamic=True,
           constants=("weight", "bias"))
def layer_norm(ctx, input, normalized_shape, weight, bias, eps):
    rank, dtype, k = len(input.shape), helpers.dtype_of(input), len(normalized_shape)
    shape = [1] * (rank - k) + list(normalized_shape)
    scale = _affine_operand(ctx, weight, 1.0, shape, dtype)
    shift = _affine_operand(ctx, bias, 0.0, shape, dtype)
    axes = helpers.axes_mask(range(rank - k, rank), rank)
    out = _normalize(ctx, input, scale, shift, axes, eps)
    if not extra_outputs_used(ctx.node):
        return out, None, None
    return (out, *_statistics(ctx, input, axes, eps, True, _stat_dtypes(ctx)))


def _group_norm_ok(node, settings) -> Optional[str]:
    reason = float_only(node, "group norm")
    if reason:
        return reason
    x = fake_input(node)
    if x.dim() < 2 or not isinstance(x.shape[1], int):
        return "group norm needs an input of rank >= 2 with a static channel dim"
    return None


@converter(aten.native_group_norm.default, validator=_group_norm_ok, dynamic=True,
           constants=("weight", "bias"))
def group_norm(ctx, input, weight, bias, N, C, HxW, group, eps):
    """Normalize the input viewed as (N, G, C/G, HxW) over its last two dims, then the
    per-channel affine on that view. The view is eager's: native_group_norm reads its input
    as (N, C, HxW) in memory order, whatever the input's shape (Note [Conditions over
    several sizes]: N and HxW may be the ints of another example of the same numel)."""
    dtype = helpers.dtype_of(input)
    # sizes by value, not -1: TensorRT cannot infer -1 of an empty input (N = 0)
    grouped = helpers.reshape(ctx, input, [N, group, C // group, HxW])
    ones = helpers.itensor(ctx, torch.ones((1, 1, 1, 1), dtype=dtype))
    zeros = helpers.itensor(ctx, torch.zeros((1, 1, 1, 1), dtype=dtype))
    axes = (1 << 2) | (1 << 3)
    out = _normalize(ctx, grouped, ones, zeros, axes, eps)
    for op, value in ((EW.PROD, weight), (EW.SUM, bias)):
        if value is not None:
            channels = _affine_operand(ctx, value, 0.0, [1, group, C // group, 1], dtype)
            out = helpers.elementwise(ctx, op, out, channels, dtype)
    out = reshape_like(ctx, out, input)
    if not extra_outputs_used(ctx.node):
        return out, None, None
    return (out, *_statistics(ctx, grouped, axes, eps, False, _stat_dtypes(ctx)))
