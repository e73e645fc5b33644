"""Upsampling converters: nearest, nearest-exact, (bi/tri)linear and bicubic
``aten.upsample_*`` onto IResizeLayer, and ``grid_sampler_2d/3d`` onto IGridSampleLayer."""

from __future__ import annotations

from typing import Optional

import torch

from ..._trt import trt
from .. import helpers
from ..registry import converter
from ._nn_common import float_only, meta, node_args

aten = torch.ops.aten
MODE, COORD = trt.InterpolationMode, trt.ResizeCoordinateTransformation
ROUND, SELECT = trt.ResizeRoundMode, trt.ResizeSelector

# Note [Resize scales]: TensorRT maps output to input coordinates with the ratio of lengths
# (in / out), also when the layer is given scales (out = floor(in * scale)). torch uses
# 1 / scale_factor when a scale factor is given and align_corners is off. Both agree when
# in * scale_factor is an integer, which is what the validator requires.

# op -> (kind of interpolation, number of resized innermost dims)
_TARGETS = {
    aten.upsample_nearest1d.vec: ("nearest", 1),
    aten.upsample_nearest2d.vec: ("nearest", 2),
    aten.upsample_nearest3d.vec: ("nearest", 3),
    aten._upsample_nearest_exact1d.vec: ("nearest_exact", 1),
    aten._upsample_nearest_exact2d.vec: ("nearest_exact", 2),
    aten._upsample_nearest_exact3d.vec: ("nearest_exact", 3),
    aten.upsample_linear1d.vec: ("linear", 1),
    aten.upsample_bilinear2d.vec: ("linear", 2),
    aten.upsample_trilinear3d.vec: ("linear", 3),
    aten.upsample_bicubic2d.vec: ("cubic", 2),
    # .default overloads: an output size plus optional per-dim scales_d/h/w
    aten.upsample_nearest2d.default: ("nearest", 2),
    aten.upsample_trilinear3d.default: ("linear", 3),
}


def _scale_reason(spatial, scale_factors, align_corners: bool) -> Optional[str]:
    if scale_factors is None or align_corners:
        return None
    for n, s in zip(spatial, scale_factors):
        exact = float(s).is_integer() if not isinstance(n, int) else float(n * s).is_integer()
        if not exact:
            return (f"scale factor {s} gives a fractional output size: torch maps coordinates "
                    "with 1/scale, TensorRT with in/out")
    return None


def _validator(nd: int):
    def validate(node, settings) -> Optional[str]:
        reason = float_only(node, "resize")
        if reason:
            return reason
        args = node_args(node)
        x = meta(args["input"])
        if x.dim() != nd + 2:
            return f"resize expects a {nd + 2}-d input"
        align_corners = bool(args.get("align_corners"))
        scales = [args.get(f"scales_{c}") for c in "dhw"[3 - nd:]]
        if not align_corners and any(s is not None for s in scales):
            for n, out, s in zip(x.shape[2:], args["output_size"], scales):
                if s is not None and (not isinstance(n, int) or n * s != out):
                    return (f"scale {s} does not map {n} to {out} exactly: torch maps "
                            "coordinates with 1/scale, TensorRT with in/out")
        return _scale_reason(x.shape[2:], args.get("scale_factors"), align_corners)

    return validate


def _configure(layer, kind: str, align_corners: bool) -> None:
    if kind == "nearest":
        layer.resize_mode = MODE.NEAREST
        layer.coordinate_transformation = COORD.ASYMMETRIC
        layer.nearest_rounding = ROUND.FLOOR
        return
    if kind == "nearest_exact":  # floor((x + 0.5) * in / out) == round_half_up(half_pixel)
        layer.resize_mode = MODE.NEAREST
        layer.coordinate_transformation = COORD.HALF_PIXEL
        layer.nearest_rounding = ROUND.HALF_UP
        return
    layer.resize_mode = MODE.LINEAR if kind == "linear" else MODE.CUBIC
    if kind == "cubic":
        layer.cubic_coeff = -0.75  # torch's bicubic uses A = -0.75
        layer.exclude_outside = False
    if align_corners:
        layer.coordinate_transformation = COORD.ALIGN_CORNERS
        layer.selector_for_single_pixel = SELECT.UPPER  # torch: one output -> input 0
    else:
        layer.coordinate_transformation = COORD.HALF_PIXEL


def _register(target, kind: str, nd: int):
    @converter(target, validator=_validator(nd), dynamic=True, family="resize")
    def upsample(ctx, input, output_size=None, scale_factors=None, align_corners=False,
                 **scales):  # scales_d/h/w of .default overloads: checked by the validator
        rank = len(input.shape)
        dims = None
        if output_size is not None:
            dims = [helpers.dim_size(ctx, input, d) for d in range(rank - nd)]
            dims += list(output_size)
            if not all(isinstance(d, int) for d in dims):
                dims = helpers.shape_tensor(ctx, dims)  # built before the resize layer
        layer = ctx.net.add_resize(input)
        _configure(layer, kind, bool(align_corners))
        if dims is None:
            layer.scales = [1.0] * (rank - nd) + [float(s) for s in scale_factors]
        elif isinstance(dims, list):
            layer.shape = dims
        else:
            layer.set_input(1, dims)
        return ctx.name_layer(layer, "resize").get_output(0)


for _target, (_kind, _nd) in _TARGETS.items():
    _register(_target, _kind, _nd)


# ---------------------------------------------------------------------------------------
# grid_sampler_2d/3d: IGridSampleLayer (ONNX GridSample semantics, as torch's grid_sample).

_GRID_MODES = {0: MODE.LINEAR, 1: MODE.NEAREST, 2: MODE.CUBIC}
_GRID_PADDING = {0: trt.SampleMode.FILL, 1: trt.SampleMode.CLAMP, 2: trt.SampleMode.REFLECT}


def _grid_validator(node, settings) -> Optional[str]:
    reason = float_only(node, "grid sample")
    if reason:
        return reason
    args = node_args(node)
    if args["interpolation_mode"] not in _GRID_MODES or args["padding_mode"] not in \
            _GRID_PADDING:
        return "unknown grid sample interpolation or padding mode"
    return None


@converter(aten.grid_sampler_2d.default, aten.grid_sampler_3d.default,
           validator=_grid_validator, dynamic=True, family="resize")
def grid_sampler(ctx, input, grid, interpolation_mode, padding_mode, align_corners):
    """(N, C, *spatial) sampled at grid (N, *out, nd) of normalized (x, y[, z])."""
    grid = helpers.cast(ctx, grid, helpers.dtype_of(input))
    layer = ctx.net.add_grid_sample(input, grid)
    layer.interpolation_mode = _GRID_MODES[interpolation_mode]
    layer.sample_mode = _GRID_PADDING[padding_mode]
    layer.align_corners = bool(align_corners)
    return ctx.name_layer(layer, "grid_sample").get_output(0)
