"""Reference semantics of further TensorRT neural-network layers: resize, grid sample and
non-maximum suppression."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..registry import reference_layer
from .common import DTYPES_BY_NAME


@reference_layer("RESIZE", "IResizeLayer",
                 attrs=("shape", "scales", "resize_mode", "coordinate_transformation",
                        "nearest_rounding", "selector_for_single_pixel", "cubic_coeff",
                        "exclude_outside"))
def resize(inputs, shape, scales, resize_mode, coordinate_transformation, nearest_rounding,
           selector_for_single_pixel, cubic_coeff, exclude_outside):
    """IResizeLayer (TensorRT's Resize operator page). The output dims come from input 1
    (integer: the shape; floating: the scales), else ``shape``, else floor(in * scale).
    Every dim whose size changes is resized separably: each output index is mapped to an
    input coordinate by the coordinate transformation (Note [Resize coordinates]), then
    NEAREST rounds it by ``nearest_rounding``; LINEAR interpolates the two neighbours with
    the coordinate clamped to [0, n - 1]; CUBIC uses the four neighbours floor(c) - 1 ..
    floor(c) + 2 with Keys' kernel of coefficient ``cubic_coeff``, taking edge values
    outside the input or, with exclude_outside, giving them weight 0 and renormalizing."""
    x = inputs[0]
    out_shape, scales = _output_shape(x, inputs[1] if len(inputs) > 1 else None, shape,
                                      scales)
    y = x if resize_mode == "NEAREST" else x.double()
    for d, (n, m) in enumerate(zip(x.shape, out_shape)):
        scale = scales[d] if scales else None
        if n == m and scale in (None, 1.0):
            continue
        src = _source_coordinates(n, m, scale, coordinate_transformation,
                                  selector_for_single_pixel)
        if resize_mode == "NEAREST":
            y = y.index_select(d, _round(src, nearest_rounding).clamp(0, n - 1).to(x.device))
        else:
            index, weight = (_linear_taps(src, n) if resize_mode == "LINEAR"
                             else _cubic_taps(src, n, cubic_coeff, exclude_outside))
            y = _weighted_gather(y, d, index.to(x.device), weight.to(x.device))
    return (y.to(x.dtype),)


def _output_shape(x, dynamic, shape, scales):
    if dynamic is not None:
        if dynamic.is_floating_point():
            scales = [float(s) for s in dynamic.tolist()]
        else:
            return [int(d) for d in dynamic.tolist()], None
    if scales:
        return [int(math.floor(n * s)) for n, s in zip(x.shape, scales)], list(scales)
    return list(shape), None


# Note [Resize coordinates]: TensorRT's Resize operator page maps output index x_r to the
# input coordinate x_o = x_r * n / m (ASYMMETRIC), (x_r + 0.5) * n / m - 0.5 (HALF_PIXEL)
# or x_r * (n - 1) / (m - 1) (ALIGN_CORNERS), for input length n and output length m.
# When the layer has scales, m is taken as n * scale before flooring, as ONNX's Resize
# does: TensorRT's ONNX parser puts constant ONNX scales on the layer unchanged, and with
# this reading all 26 ONNX resize/upsample node cases pass with constant scales (24 with
# ALIGN_CORNERS on the floored m). torch's align_corners uses the floored m, so it differs
# for a fractional scale (a third-party TensorRT converter, Baidu's Poros, warns that
# "interpolate with align_corners and scale_factor works differently in TensorRT and
# PyTorch"); a converter wanting torch's result sets the output shape instead. An output
# of one element maps to 0 with ResizeSelector UPPER ("the upper left pixel") and by the
# formula with FORMULA, where ALIGN_CORNERS' 0 / 0 is taken as 0.


def _source_coordinates(n, m, scale, transform, selector):
    dst = torch.arange(m, dtype=torch.float64)
    if m == 1 and selector == "UPPER":
        return torch.zeros(1, dtype=torch.float64)
    length = n * scale if scale else m
    if transform == "ALIGN_CORNERS":
        return dst * ((n - 1) / (length - 1) if length != 1 else 0.0)
    if transform == "HALF_PIXEL":
        return (dst + 0.5) * (n / length) - 0.5
    return dst * (n / length)  # ASYMMETRIC


_ROUNDING = {
    "FLOOR": torch.floor,
    "CEIL": torch.ceil,
    "HALF_UP": lambda v: torch.floor(v + 0.5),
    "HALF_DOWN": lambda v: torch.ceil(v - 0.5),
}


def _round(src, rounding):
    return _ROUNDING[rounding](src).long()


def _linear_taps(src, n):
    c = src.clamp(0, n - 1)
    i0 = c.floor()
    t = c - i0
    i0 = i0.long()
    return torch.stack([i0, (i0 + 1).clamp(max=n - 1)], -1), torch.stack([1 - t, t], -1)


def _cubic_taps(src, n, a, exclude_outside):
    """Keys' cubic convolution kernel with coefficient a at distances 1 + t, t, 1 - t, 2 - t
    of the neighbours floor(c) - 1 .. floor(c) + 2."""
    i0 = src.floor()
    t = src - i0
    index = i0.long().unsqueeze(-1) + torch.arange(-1, 3)
    dist = torch.stack([1 + t, t, 1 - t, 2 - t], -1)
    weight = torch.where(
        dist <= 1,
        ((a + 2) * dist - (a + 3)) * dist * dist + 1,
        ((a * dist - 5 * a) * dist + 8 * a) * dist - 4 * a)
    outside = (index < 0) | (index > n - 1)
    if exclude_outside:
        weight = torch.where(outside, 0.0, weight)
        weight = weight / weight.sum(-1, keepdim=True)
    return index.clamp(0, n - 1), weight


def _weighted_gather(y, dim, index, weight):
    """out[..., j, ...] = sum_k weight[j, k] * y[..., index[j, k], ...] along ``dim``."""
    m, taps = index.shape
    picked = y.index_select(dim, index.reshape(-1))
    shape = list(y.shape)
    shape[dim:dim + 1] = [m, taps]
    picked = picked.reshape(shape)
    w_shape = [1] * len(shape)
    w_shape[dim:dim + 2] = [m, taps]
    return (picked * weight.reshape(w_shape)).sum(dim + 1)


_MODES = {"LINEAR": "bilinear", "NEAREST": "nearest", "CUBIC": "bicubic"}
_PADDING = {"FILL": "zeros", "CLAMP": "border", "REFLECT": "reflection"}


@reference_layer("GRID_SAMPLE", "IGridSampleLayer",
                 attrs=("interpolation_mode", "align_corners", "sample_mode"))
def grid_sample(inputs, interpolation_mode, align_corners, sample_mode):
    """IGridSampleLayer = ONNX GridSample on (N, C, *spatial) with grid (N, *out, nd) of
    normalized (x, y[, z]) (rank 4 or 5): FILL samples zeros outside, CLAMP clamps each
    tap's index to the border, REFLECT mirrors the coordinate about the border; NEAREST
    rounds half to even and CUBIC uses A = -0.75, as torch's grid_sample does. TensorRT
    allows only these three sample modes.

    Note [Grid sample CLAMP]: SampleMode's doc says "out of bounds indices are clamped to
    bounds", which is torch's border padding; ONNX's reference evaluator instead clamps the
    coordinate before interpolating, which differs for CUBIC near the border."""
    x, grid = inputs
    if sample_mode not in _PADDING:
        raise NotImplementedError(f"grid sample mode {sample_mode} (TensorRT allows only "
                                  "FILL, CLAMP and REFLECT)")
    if interpolation_mode == "CUBIC" and x.dim() == 5:
        raise NotImplementedError("cubic grid sample of a rank-5 input")
    out = F.grid_sample(x.double(), grid.double(), mode=_MODES[interpolation_mode],
                        padding_mode=_PADDING[sample_mode], align_corners=bool(align_corners))
    return (out.to(x.dtype),)


@reference_layer("NMS", "INMSLayer",
                 attrs=("bounding_box_format", "topk_box_limit", "indices_type"))
def nms(inputs, bounding_box_format, topk_box_limit, indices_type):
    """INMSLayer. Inputs: boxes [B, N, 4] (shared by the classes) or [B, N, C, 4], scores
    [B, N, C], max_output_boxes_per_class (int32 scalar), optional iou_threshold and
    score_threshold (float scalars, default 0). Per batch item, the (box, class) pairs whose
    score exceeds score_threshold are sorted by decreasing score, the first topk_box_limit
    are kept, and a pair is selected when its class has fewer than max_output_boxes_per_class
    selections and its IoU with every selected box of its class is <= iou_threshold.
    Outputs: selected (batch, class, box) rows [count, 3], increasing batch then decreasing
    score, and count (int32 scalar).

    Note [NMS order]: TensorRT orders a batch item's selections by score across classes and
    leaves ties unspecified; here ties keep box-major, then class order (a stable sort of
    the [N, C] scores). ONNX's NonMaxSuppression instead lists class by class, and without a
    score_threshold it considers every box, where TensorRT's default threshold 0 leaves out
    scores <= 0."""
    boxes, scores = inputs[0].double(), inputs[1].double()
    limit = int(inputs[2])
    iou_threshold = _optional_scalar(inputs, 3)
    score_threshold = _optional_scalar(inputs, 4)
    if boxes.dim() == 3:
        boxes = boxes.unsqueeze(2)
    corners = _corners(boxes, bounding_box_format)
    rows = []
    for b in range(scores.shape[0]):
        rows += _nms_one(b, corners[b], scores[b], limit, iou_threshold, score_threshold,
                         topk_box_limit)
    dtype = DTYPES_BY_NAME.get(indices_type, torch.int32)
    selected = torch.tensor(rows, dtype=dtype).reshape(-1, 3).to(inputs[0].device)
    return selected, torch.tensor(len(rows), dtype=torch.int32, device=selected.device)


def _optional_scalar(inputs, i):
    return float(inputs[i]) if len(inputs) > i and inputs[i] is not None else 0.0


def _corners(boxes, fmt):
    """(x_min, y_min, x_max, y_max) from CORNER_PAIRS (any two diagonal corners) or
    CENTER_SIZES (x_center, y_center, width, height)."""
    if fmt == "CENTER_SIZES":
        c, s = boxes[..., :2], boxes[..., 2:]
        return torch.cat([c - s / 2, c + s / 2], -1)
    a, b = boxes[..., :2], boxes[..., 2:]
    return torch.cat([torch.minimum(a, b), torch.maximum(a, b)], -1)


def _iou(p, q):
    lo, hi = torch.maximum(p[:2], q[:2]), torch.minimum(p[2:], q[2:])
    inter = (hi - lo).clamp(min=0).prod()
    union = (p[2:] - p[:2]).prod() + (q[2:] - q[:2]).prod() - inter
    return float(inter / union) if union > 0 else 0.0


def _nms_one(b, corners, scores, limit, iou_threshold, score_threshold, topk):
    n, classes = scores.shape
    flat = scores.reshape(-1)
    order = torch.sort(flat, descending=True, stable=True).indices.tolist()
    candidates = [i for i in order if flat[i] > score_threshold][:topk]
    chosen: dict[int, list[int]] = {c: [] for c in range(classes)}
    rows = []
    for i in candidates:
        box, c = divmod(i, classes)
        box_of = corners[box, c if corners.shape[1] > 1 else 0]
        if len(chosen[c]) >= limit:
            continue
        if all(_iou(box_of, corners[j, c if corners.shape[1] > 1 else 0]) <= iou_threshold
               for j in chosen[c]):
            chosen[c].append(box)
            rows.append([b, c, box])
    return rows
