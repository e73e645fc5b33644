"""Upsampling converters: nearest, nearest-exact, (bi/tri)linear and bicubic
``aten.upsample_*`` onto IResizeLayer, and ``grid_sampler_2d/3d`` onto IGridSampleLayer."""

from __future__ import annotations

import math
from typing import Optional

import torch

from ..._trt import trt
from .. import dims as D
from .. import helpers
from .._trt_ops import EW, UN
from ..blocks.nodes import fake, fake_input, float_only, node_args
from ..blocks.shape import index_vector
from ..registry import converter

aten = torch.ops.aten
MODE, COORD = trt.InterpolationMode, trt.ResizeCoordinateTransformation
ROUND, SELECT = trt.ResizeRoundMode, trt.ResizeSelector

# Note [Resize scales]: TensorRT maps output to input coordinates with the ratio of lengths
# in / out (Resize operator page). When a scale factor is given and align_corners is off,
# torch maps with 1 / scale instead, computed in float32 (compute_scales_value<float>,
# aten/src/ATen/native/UpSample.h), and its output size is floor(in * scale). The two
# agree when in * scale is an integer; otherwise (a fractional output size, or a dynamic
# dim with a non-integer scale) the converter samples explicitly: ATen's source index
# (and linear weight) of every output position is computed in float32 from the runtime
# size, and the input is gathered along each resized dim (_resample). With align_corners
# torch maps with (in - 1) / (out - 1) of the floored output size, while TensorRT given
# scales takes out = in * scale unfloored (the ONNX reading, Note [Resize coordinates] of
# the reference RESIZE layer): the layer gets the floored output shape instead.

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


MAX_TABLE = 1 << 16  # output sizes tabulated per input size over a dynamic dim's range


def _bounds(n) -> Optional[tuple[int, int]]:
    """(min, max) of a dim: an int, or a SymInt bounded by its shape environment."""
    if isinstance(n, int):
        return n, n
    try:
        r = n.node.shape_env.bound_sympy(n.node.expr)
        return int(r.lower), int(r.upper)
    except (AttributeError, TypeError, ValueError, OverflowError):
        return None


def _inexact(n, scale) -> bool:
    """True when a dim of size ``n`` (an int when static; a SymInt or ITensor when dynamic)
    scaled by ``scale`` needs explicit sampling (Note [Resize scales])."""
    if scale is None:
        return False
    if isinstance(n, int):
        return not float(n * scale).is_integer()
    return not float(scale).is_integer()


def _scales(args: dict, nd: int) -> list:
    """Per-dim scale factors of a .vec (scale_factors) or .default (scales_d/h/w) node."""
    if args.get("scale_factors") is not None:
        return [float(s) for s in args["scale_factors"]]
    return [args.get(f"scales_{c}") for c in "dhw"[3 - nd:]]


def _upsample_ok(nd: int):
    def validate(node, settings) -> Optional[str]:
        reason = float_only(node, "resize")
        if reason:
            return reason
        args = node_args(node)
        x = fake(args["input"])
        if x.dim() != nd + 2:
            return f"resize expects a {nd + 2}-d input"
        scales = _scales(args, nd)
        if not any(_inexact(n, sc) for n, sc in zip(x.shape[2:], scales)):
            return None
        for n, sc in zip(x.shape[2:], scales):
            if isinstance(n, int):
                continue
            if sc is None:
                return "a dynamic dim without a scale next to a fractionally scaled one"
            bounds = _bounds(n)
            if bounds is None or bounds[1] - bounds[0] >= MAX_TABLE:
                return f"scale factor {sc} on a dynamic dim without a small bounded range"
        return None

    return validate


def _out_size(ctx, n, scale: float, bounds):
    """floor(n * scale) computed as ATen does, in double (a product such as 90 * 0.7 rounds
    to 62.99999999999999, giving 62): in Python for a static size, from a table over the
    dim's (min, max) range for a runtime size."""
    if not helpers.is_tensor(n):
        return int(math.floor(n * scale))
    if float(scale).is_integer():
        return D.dim_op(ctx, "mul", n, int(scale))
    low, high = bounds
    table = torch.tensor([math.floor(k * scale) for k in range(low, high + 1)],
                         dtype=torch.int64)
    offset = D.dim_op(ctx, "sub", n, low)
    gather = ctx.net.add_gather(helpers.itensor(ctx, table), offset, 0)
    return ctx.name_layer(gather, "scaled_size").get_output(0)


def _source(ctx, kind: str, n, m, ratio: float):
    """ATen's input index of every output position along one dim (int64, (m,)) and, for
    linear and cubic, its fractional offset t (float32): nearest floor(dst * r) (identity
    when m == n, dst / 2 when m == 2n), nearest-exact floor((dst + 0.5) * r), linear
    max((dst + 0.5) * r - 0.5, 0), cubic (dst + 0.5) * r - 0.5; indices capped at n - 1
    and t clamped to [0, 1] (guard_index_and_lambda, UpSample.h)."""
    f32, i64 = torch.float32, torch.int64
    dst = index_vector(ctx, m)
    src = helpers.cast(ctx, dst, f32)
    if kind != "nearest":
        src = helpers.elementwise(ctx, EW.SUM, src, torch.tensor(0.5), f32)
    src = helpers.elementwise(ctx, EW.PROD, src, torch.tensor(ratio, dtype=f32), f32)
    if kind in ("linear", "cubic"):
        src = helpers.elementwise(ctx, EW.SUB, src, torch.tensor(0.5), f32)
    if kind == "linear":
        src = helpers.elementwise(ctx, EW.MAX, src, torch.tensor(0.0), f32)
    index = helpers.cast(ctx, helpers.unary(ctx, UN.FLOOR, src), i64)
    index = helpers.elementwise(ctx, EW.MIN, index, D.as_dim(ctx, D.dim_op(ctx, "sub", n, 1)),
                                i64)
    if kind == "nearest":
        index = _nearest_special_cases(ctx, index, dst, n, m)
    if kind in ("nearest", "nearest_exact"):
        return index, None
    t = helpers.elementwise(ctx, EW.SUB, src, helpers.cast(ctx, index, f32), f32)
    t = helpers.elementwise(ctx, EW.MAX, t, torch.tensor(0.0), f32)
    return index, helpers.elementwise(ctx, EW.MIN, t, torch.tensor(1.0), f32)


def _cubic_weights(ctx, t) -> list:
    """torch's bicubic weights (A = -0.75) of the taps at index - 1 .. index + 2 for offset
    t (get_cubic_upsample_coefficients, UpSample.h)."""
    a, f32 = -0.75, torch.float32

    def poly(x, coefficients):  # Horner: ((c0 x + c1) x + c2) x + c3
        out = helpers.elementwise(ctx, EW.PROD, x, torch.tensor(coefficients[0]), f32)
        for k, c in enumerate(coefficients[1:], start=2):
            out = helpers.elementwise(ctx, EW.SUM, out, torch.tensor(c), f32)
            if k < len(coefficients):
                out = helpers.elementwise(ctx, EW.PROD, out, x, f32)
        return out

    near = (a + 2, -(a + 3), 0.0, 1.0)  # |x| <= 1
    far = (a, -5 * a, 8 * a, -4 * a)  # 1 < |x| < 2
    one = torch.tensor(1.0)
    rest = helpers.elementwise(ctx, EW.SUB, one, t, f32)
    return [poly(helpers.elementwise(ctx, EW.SUM, t, one, f32), far), poly(t, near),
            poly(rest, near), poly(helpers.elementwise(ctx, EW.SUM, rest, one, f32), far)]


def _taps(ctx, kind: str, n, m, ratio: float) -> list:
    """(input index, weight or None) per tap of every output position along one dim."""
    index, t = _source(ctx, kind, n, m, ratio)
    if t is None:
        return [(index, None)]
    last = D.as_dim(ctx, D.dim_op(ctx, "sub", n, 1))

    def shifted(k: int):
        moved = helpers.elementwise(ctx, EW.SUM, index, torch.tensor(k), torch.int64)
        moved = helpers.elementwise(ctx, EW.MAX, moved, torch.tensor(0), torch.int64)
        return helpers.elementwise(ctx, EW.MIN, moved, last, torch.int64)

    if kind == "linear":
        return [(index, helpers.elementwise(ctx, EW.SUB, torch.tensor(1.0), t, torch.float32)),
                (shifted(1), t)]
    return list(zip([shifted(k) for k in (-1, 0, 1, 2)], _cubic_weights(ctx, t)))


def _nearest_special_cases(ctx, index, dst, n, m):
    """ATen's nearest_idx: output index itself when m == n, dst >> 1 when m == 2n."""
    if not helpers.is_tensor(n) and not helpers.is_tensor(m):
        if m == n:
            return dst
        if m == 2 * n:
            return helpers.elementwise(ctx, EW.FLOOR_DIV, dst, 2, torch.int64)
        return index
    half = helpers.elementwise(ctx, EW.FLOOR_DIV, dst, 2, torch.int64)
    for size, value in ((D.dim_op(ctx, "mul", n, 2), half), (n, dst)):
        same = helpers.elementwise(ctx, EW.EQUAL, D.as_dim(ctx, m), D.as_dim(ctx, size),
                                   torch.int64)
        layer = ctx.net.add_select(helpers.expand_rank(ctx, same, 1), value, index)
        index = ctx.name_layer(layer, "nearest_index").get_output(0)
    return index


def _resample(ctx, x, kind: str, sizes: list, ratios: list):
    """Resize the last len(sizes) dims of ``x`` to ``sizes`` by explicit gathers (Note
    [Resize scales]), one dim after another; a ratio of None leaves its dim alone."""
    rank, dtype = len(x.shape), helpers.dtype_of(x)
    work = dtype if kind in ("nearest", "nearest_exact") else torch.float32
    y = helpers.cast(ctx, x, work)
    for i, (m, ratio) in enumerate(zip(sizes, ratios)):
        if ratio is None:
            continue
        axis = rank - len(sizes) + i
        out = None
        for index, weight in _taps(ctx, kind, helpers.dim_size(ctx, y, axis), m, ratio):
            tap = ctx.name_layer(ctx.net.add_gather(y, index, axis), "resample").get_output(0)
            if weight is not None:
                weight = helpers.reshape(ctx, weight, [m] + [1] * (rank - axis - 1))
                tap = helpers.elementwise(ctx, EW.PROD, tap, weight, work)
            out = tap if out is None else helpers.elementwise(ctx, EW.SUM, out, tap, work)
        y = out
    return helpers.cast(ctx, y, dtype)


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
    @converter(target, validator=_upsample_ok(nd), dynamic=True, family="resize")
    def upsample(ctx, input, output_size=None, scale_factors=None, align_corners=False,
                 **scales_dhw):  # scales_d/h/w of .default overloads
        rank = len(input.shape)
        scales = _scales({"scale_factors": scale_factors, **scales_dhw}, nd)
        spatial = [helpers.dim_size(ctx, input, d) for d in range(rank - nd, rank)]
        if any(_inexact(n, sc) for n, sc in zip(spatial, scales)) and output_size is None:
            symbolic = fake_input(ctx.node).shape[rank - nd:]
            output_size = [_out_size(ctx, n, sc, _bounds(sym))
                           for n, sc, sym in zip(spatial, scales, symbolic)]
        if not align_corners and any(_inexact(n, sc) for n, sc in zip(spatial, scales)):
            sizes = output_size
            ratios = [None if sc is None and n == m else
                      float(torch.tensor(1.0 / sc if sc else n / m, dtype=torch.float32))
                      for n, m, sc in zip(spatial, sizes, scales)]
            return _resample(ctx, input, kind, sizes, ratios)
        dims = None
        if output_size is not None:
            dims = [helpers.dim_size(ctx, input, d) for d in range(rank - nd)]
            dims += list(output_size)
            if not all(isinstance(d, int) for d in dims):
                dims = helpers.shape_tensor(ctx, dims)  # built before the resize layer
        layer = ctx.net.add_resize(input)
        _configure(layer, kind, bool(align_corners))
        if dims is None:
            layer.scales = [1.0] * (rank - nd) + [float(sc) for sc in scale_factors]
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


def _grid_ok(node, settings) -> Optional[str]:
    reason = float_only(node, "grid sample")
    if reason:
        return reason
    args = node_args(node)
    if args["interpolation_mode"] not in _GRID_MODES or args["padding_mode"] not in \
            _GRID_PADDING:
        return "unknown grid sample interpolation or padding mode"
    if args["interpolation_mode"] == 2 and fake(args["input"]).dim() != 4:
        return "bicubic grid sample takes a 4-D input only (TensorRT's CUBIC, as torch)"
    return None


@converter(aten.grid_sampler_2d.default, aten.grid_sampler_3d.default,
           validator=_grid_ok, dynamic=True, family="resize")
def grid_sampler(ctx, input, grid, interpolation_mode, padding_mode, align_corners):
    """(N, C, *spatial) sampled at grid (N, *out, nd) of normalized (x, y[, z])."""
    grid = helpers.cast(ctx, grid, helpers.dtype_of(input))
    layer = ctx.net.add_grid_sample(helpers.itensor(ctx, input), grid)  # input may be constant
    layer.interpolation_mode = _GRID_MODES[interpolation_mode]
    layer.sample_mode = _GRID_PADDING[padding_mode]
    layer.align_corners = bool(align_corners)
    return ctx.name_layer(layer, "grid_sample").get_output(0)
