"""Reference RESIZE (every InterpolationMode, coordinate transformation, rounding mode and
selector; cubic_coeff, exclude_outside, scales), NMS and GRID_SAMPLE layers against values
worked out by hand from TensorRT's documented semantics (the derivation is in the comment
next to each expectation) or an independent float64 loop written here; and POOLING,
CONVOLUTION, DECONVOLUTION, NORMALIZATION, LRN, NMS and RESIZE layers built through
TensorRT's Python API and snapshotted, so every attribute they read is recorded."""

import math

import numpy as np
import pytest
import torch

from torch_trt_ref._trt import make_logger, to_trt_dtype, trt
from torch_trt_ref.runtime.reference.executor import run_snapshot
from torch_trt_ref.runtime.snapshot import take_snapshot

from .conftest import f32, run


def resize(x, shape=(), scales=(), mode="NEAREST", transform="ASYMMETRIC", rounding="FLOOR",
           selector="FORMULA", coeff=-0.75, exclude=False, dynamic=None):
    inputs = [x] if dynamic is None else [x, dynamic]
    (out,) = run("RESIZE", inputs, shape=shape, scales=scales, resize_mode=mode,
                 coordinate_transformation=transform, nearest_rounding=rounding,
                 selector_for_single_pixel=selector, cubic_coeff=coeff, exclude_outside=exclude)
    return out


@pytest.mark.parametrize("rounding,expected", [
    # ASYMMETRIC 2 -> 4: src = dst * 2/4 = 0, .5, 1, 1.5 (clamped to index 1)
    ("HALF_UP", [10, 20, 20, 20]),  # .5 -> 1
    ("HALF_DOWN", [10, 10, 20, 20]),  # .5 -> 0, 1.5 -> 1
    ("FLOOR", [10, 10, 20, 20]),
    ("CEIL", [10, 20, 20, 20]),
])
def test_resize_nearest_rounding(rounding, expected):
    out = resize(f32([10, 20]), shape=(4,), rounding=rounding)
    assert out.tolist() == expected


def test_resize_nearest_three_dims_and_leading_dim():
    # every dim that changes is resized: (2, 1, 1, 2) -> (2, 2, 2, 4), ASYMMETRIC floor
    # repeats each element along the grown dims; dim 0 is unchanged
    x = f32([[[[1, 2]]], [[[3, 4]]]])
    out = resize(x, shape=(2, 2, 2, 4))
    assert torch.equal(out[0, 1, 1], f32([1, 1, 2, 2]))
    assert torch.equal(out[1, 0, 0], f32([3, 3, 4, 4]))


@pytest.mark.parametrize("transform,size,expected", [
    # ASYMMETRIC 2 -> 4: src = 0, .5, 1, 1.5 -> clamped to 1: [0, 2, 4, 4]
    ("ASYMMETRIC", 4, [0, 2, 4, 4]),
    # HALF_PIXEL 2 -> 3: src = (dst + .5) * 2/3 - .5 = -1/6 (clamped 0), .5, 7/6 (clamped 1)
    ("HALF_PIXEL", 3, [0, 2, 4]),
])
def test_resize_linear(transform, size, expected):
    out = resize(f32([0, 4]), shape=(size,), mode="LINEAR", transform=transform)
    assert torch.allclose(out, f32(expected))


def test_resize_linear_three_innermost_dims():
    # trilinear ALIGN_CORNERS 2 -> 3 on each of three dims: the centre (src 0.5, 0.5, 0.5)
    # is the mean of the 8 corners 0..7 = 3.5; corners stay
    x = torch.arange(8, dtype=torch.float32).reshape(1, 2, 2, 2)
    out = resize(x, shape=(1, 3, 3, 3), mode="LINEAR", transform="ALIGN_CORNERS")
    assert out[0, 1, 1, 1].item() == 3.5
    assert out[0, 2, 2, 2].item() == 7 and out[0, 0, 0, 2].item() == 1


@pytest.mark.parametrize("selector,expected", [
    ("UPPER", 0.0),  # one output pixel: the upper-left input
    ("FORMULA", 4.0),  # HALF_PIXEL 3 -> 1: src = .5 * 3 - .5 = 1
])
def test_resize_single_pixel_selector(selector, expected):
    out = resize(f32([0, 4, 8]), shape=(1,), mode="LINEAR", transform="HALF_PIXEL",
                 selector=selector)
    assert out.tolist() == [expected]


def keys(s, a):
    """Keys' cubic convolution kernel at distance s (Keys 1981; ONNX Resize cubic)."""
    s = abs(s)
    if s <= 1:
        return (a + 2) * s ** 3 - (a + 3) * s ** 2 + 1
    if s < 2:
        return a * s ** 3 - 5 * a * s ** 2 + 8 * a * s - 4 * a
    return 0.0


def cubic_loop(values, src, a, exclude):
    """Independent float64 loop: the four neighbours of floor(src), edge values outside or,
    with exclude, weight 0 outside and the rest renormalized."""
    n = len(values)
    base = math.floor(src)
    taps = [(j, keys(src - j, a)) for j in range(base - 1, base + 3)]
    if exclude:
        taps = [(j, w) for j, w in taps if 0 <= j < n]
        total = sum(w for _, w in taps)
        taps = [(j, w / total) for j, w in taps]
    return sum(w * values[min(max(j, 0), n - 1)] for j, w in taps)


@pytest.mark.parametrize("coeff", [-0.75, -0.5])
@pytest.mark.parametrize("exclude", [False, True])
@pytest.mark.parametrize("transform", ["ALIGN_CORNERS", "HALF_PIXEL", "ASYMMETRIC"])
def test_resize_cubic_against_loop(coeff, exclude, transform):
    values = [0.0, 0.0, 16.0, 0.0, 3.0]
    n, m = len(values), 8
    out = resize(f32([values]), shape=(1, m), mode="CUBIC", transform=transform,
                 coeff=coeff, exclude=exclude)
    for dst in range(m):
        src = {"ALIGN_CORNERS": dst * (n - 1) / (m - 1), "ASYMMETRIC": dst * n / m,
               "HALF_PIXEL": (dst + 0.5) * n / m - 0.5}[transform]
        assert out[0, dst].item() == pytest.approx(cubic_loop(values, src, coeff, exclude),
                                                   abs=1e-5)


def test_resize_cubic_coefficient_by_hand():
    # ALIGN_CORNERS 4 -> 7, src = dst / 2. A = -0.5 at t = .5: Keys weights
    # (-0.0625, 0.5625, 0.5625, -0.0625). dst 3 (src 1.5): 16 * 0.5625 = 9.
    # dst 1 (src .5) reads index -1: clamped to 0 (value 0) -> 16 * -0.0625 = -1; with
    # exclude_outside its weight is 0 and the rest (sum 1.0625) renormalized: -1 / 1.0625
    x = f32([[0, 0, 16, 0]])
    out = resize(x, shape=(1, 7), mode="CUBIC", transform="ALIGN_CORNERS", coeff=-0.5)
    assert out[0, 3].item() == pytest.approx(9.0) and out[0, 1].item() == pytest.approx(-1.0)
    out = resize(x, shape=(1, 7), mode="CUBIC", transform="ALIGN_CORNERS", coeff=-0.5,
                 exclude=True)
    assert out[0, 1].item() == pytest.approx(-1 / 1.0625)


def test_resize_scales_set_size_and_coordinates():
    # scales 1.5 on length 3: out = floor(4.5) = 4; HALF_PIXEL with 1/scale (ONNX's
    # Resize): src = (dst + .5) / 1.5 - .5 = -1/6, 1/2, 7/6, 11/6 -> over [0, 3, 6]:
    # [0, 1.5, 3.5, 5.5]
    expected = [0, 1.5, 3.5, 5.5]
    out = resize(f32([0, 3, 6]), scales=(1.5,), mode="LINEAR", transform="HALF_PIXEL")
    assert torch.allclose(out, f32(expected))
    # the same scales given as a float input 1
    out = resize(f32([0, 3, 6]), mode="LINEAR", transform="HALF_PIXEL", dynamic=f32([1.5]))
    assert torch.allclose(out, f32(expected))


def test_resize_scales_align_corners_use_the_unfloored_length():
    # ONNX's Resize: 4 * 0.6 = 2.4 -> 2 outputs; ALIGN_CORNERS src = dst * 3 / (2.4 - 1):
    # 0 and 15/7 -> over [0, 10, 20, 30]: 0 and 150/7
    out = resize(f32([0, 10, 20, 30]), scales=(0.6,), mode="LINEAR", transform="ALIGN_CORNERS")
    assert torch.allclose(out, f32([0, 150 / 7]))


def test_resize_shape_from_input_1():
    out = resize(f32([1, 2]), dynamic=torch.tensor([3], dtype=torch.int32))
    assert out.tolist() == [1, 1, 2]  # ASYMMETRIC floor: src = 0, 2/3, 4/3


# --- NMS ---

# boxes A, B overlap with IoU 81 / 119 = 0.68; C is apart from both
BOXES = f32([[[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]]])
# scores [box, class]: A (0.9, 0.1), B (0.8, 0.85), C (0.7, 0.2)
SCORES = f32([[[0.9, 0.1], [0.8, 0.85], [0.7, 0.2]]])


def nms(boxes=BOXES, scores=SCORES, limit=2, iou=0.5, score=0.15, fmt="CORNER_PAIRS",
        topk=5000, indices_type="INT32"):
    inputs = [boxes, scores, torch.tensor(limit, dtype=torch.int32), f32(iou), f32(score)]
    selected, count = run("NMS", inputs, bounding_box_format=fmt, topk_box_limit=topk,
                          indices_type=indices_type)
    assert count.dtype == torch.int32 and count.item() == selected.shape[0]
    return selected


def test_nms_selects_by_score_across_classes():
    # scores above 0.15, by decreasing score: (A,0) .9, (B,1) .85, (B,0) .8, (C,0) .7,
    # (C,1) .2. (A,0) kept; (B,1) kept (class 1 had none); (B,0) suppressed by A (IoU .68
    # > .5); (C,0) kept; (C,1) kept. Rows (batch, class, box) in that order.
    assert nms().tolist() == [[0, 0, 0], [0, 1, 1], [0, 0, 2], [0, 1, 2]]


@pytest.mark.parametrize("kw,expected", [
    # one box per class: (C,0) and (C,1) come after their class is full
    ({"limit": 1}, [[0, 0, 0], [0, 1, 1]]),
    # only the top 3 pairs are candidates: (A,0), (B,1), (B,0) -> B suppressed
    ({"topk": 3}, [[0, 0, 0], [0, 1, 1]]),
    # IoU threshold 0.7 > 0.68: (B,0) is kept, then class 0 is full (limit 2)
    ({"iou": 0.7}, [[0, 0, 0], [0, 1, 1], [0, 0, 1], [0, 1, 2]]),
    # score threshold 0.75: only .9, .85, .8 exceed it
    ({"score": 0.75}, [[0, 0, 0], [0, 1, 1]]),
    ({"limit": 0}, []),
])
def test_nms_limits_and_thresholds(kw, expected):
    assert nms(**kw).tolist() == expected


def test_nms_thresholds_default_to_zero():
    # no IoU / score threshold inputs: both 0. A score must exceed 0 (C's scores are 0 and
    # -1), and any overlap suppresses: (B, 1) .85 is kept, (B, 0) .8 overlaps A
    scores = f32([[[0.9, 0.1], [0.8, 0.85], [0.0, -1.0]]])
    inputs = [BOXES, scores, torch.tensor(5, dtype=torch.int32)]
    selected, count = run("NMS", inputs, bounding_box_format="CORNER_PAIRS",
                          topk_box_limit=5000, indices_type="INT32")
    assert selected.tolist() == [[0, 0, 0], [0, 1, 1]] and count.item() == 2


def test_nms_box_formats_and_index_type():
    centers = f32([[[5, 5, 10, 10], [6, 6, 10, 10], [25, 25, 10, 10]]])  # same boxes
    flipped = BOXES[..., [2, 3, 0, 1]]  # the other diagonal's corners, first
    expected = [[0, 0, 0], [0, 1, 1], [0, 0, 2], [0, 1, 2]]
    assert nms(boxes=centers, fmt="CENTER_SIZES").tolist() == expected
    assert nms(boxes=flipped).tolist() == expected
    assert nms(indices_type="INT64").dtype == torch.int64


def test_nms_iou_equal_to_threshold_is_kept():
    # [0, 3] x [0, 1] and [1, 4] x [0, 1]: intersection 2, union 4, IoU exactly 0.5
    boxes = f32([[[0, 0, 3, 1], [1, 0, 4, 1]]])
    scores = f32([[[0.9], [0.8]]])
    assert nms(boxes, scores, iou=0.5, score=0.0).tolist() == [[0, 0, 0], [0, 0, 1]]
    assert nms(boxes, scores, iou=0.49, score=0.0).tolist() == [[0, 0, 0]]


def test_nms_per_class_boxes_and_batches():
    # boxes [B, N, C, 4]: in class 1 the two boxes are far apart, in class 0 identical;
    # batch 1 has the scores reversed. Increasing batch, then decreasing score.
    same, apart = f32([[0, 0, 1, 1], [0, 0, 1, 1]]), f32([[0, 0, 1, 1], [5, 5, 6, 6]])
    boxes = torch.stack([same, apart], 1).unsqueeze(0).expand(2, 2, 2, 4)
    scores = torch.stack([f32([[0.9, 0.6], [0.8, 0.7]]), f32([[0.6, 0.9], [0.7, 0.8]])])
    rows = nms(boxes, scores, iou=0.5, score=0.0).tolist()
    assert rows == [[0, 0, 0], [0, 1, 1], [0, 1, 0],  # (1, 0) .8 suppressed by (0, 0)
                    [1, 1, 0], [1, 1, 1], [1, 0, 1]]  # (0, 0) .6 suppressed by (1, 0) .7


# --- GRID_SAMPLE ---

IMAGE = f32([[[[1, 2], [3, 4]]]])


def grid_sample(x, grid, mode="LINEAR", align=False, sample="FILL"):
    (out,) = run("GRID_SAMPLE", [x, grid], interpolation_mode=mode, align_corners=align,
                 sample_mode=sample)
    return out.flatten().tolist()


@pytest.mark.parametrize("sample,expected", [
    # (x, y) = (-2, -1) without align corners: pixel coordinates ((g + 1) * 2 - 1) / 2 =
    # (-1.5, -0.5). FILL: weight 1/2 each on columns -2 and -1 (outside) of row -0.5 ->
    # zeros everywhere -> 0. CLAMP: the border pixel (0, 0) = 1. REFLECT: -1.5 mirrors
    # about -0.5 to 0.5, -0.5 stays -0.5 -> clipped to row 0: (1 + 2) / 2
    ("FILL", 0.0), ("CLAMP", 1.0), ("REFLECT", 1.5),
])
def test_grid_sample_modes(sample, expected):
    assert grid_sample(IMAGE, f32([[[[-2, -1]]]]), sample=sample) == [expected]


def test_grid_sample_3d_linear_and_cubic_2d():
    # rank 5, align corners: the centre of a 2x2x2 volume is the mean of 0..7
    x = torch.arange(8, dtype=torch.float32).reshape(1, 1, 2, 2, 2)
    assert grid_sample(x, torch.zeros(1, 1, 1, 1, 3), align=True) == [3.5]
    # bicubic at a pixel centre is that pixel (Keys' weights 0, 1, 0, 0)
    assert grid_sample(IMAGE, f32([[[[1, 1]]]]), mode="CUBIC", align=True) == [4.0]


def test_grid_sample_wrap_is_not_a_grid_sample_mode():
    # IGridSampleLayer allows only CLAMP, FILL and REFLECT
    with pytest.raises(NotImplementedError):
        grid_sample(IMAGE, torch.zeros(1, 1, 1, 2), sample="WRAP")


def grid_sample_loop(image, gx, gy, mode, align, sample):
    """Independent float64 loop of GridSample on one channel (2D), after ONNX's reference
    evaluator: denormalize, for REFLECT mirror an out-of-range coordinate about the border,
    then interpolate taps that are 0 (FILL), clamped (CLAMP) or mirrored (REFLECT) outside.
    Unlike ONNX's evaluator, CLAMP does not move the coordinate first: TensorRT's SampleMode
    doc says "out of bounds indices are clamped to bounds" (it matters for CUBIC only)."""
    rows, cols = len(image), len(image[0])

    def coordinate(g, n):
        return (g + 1) / 2 * (n - 1) if align else ((g + 1) * n - 1) / 2

    def reflect(v, lo, hi):
        span = hi - lo
        while v < lo or v > hi:
            v = 2 * lo - v if v < lo else 2 * hi - v
        return v if span > 0 else lo

    def adjust(v, n):
        lo, hi = (0, n - 1) if align else (-0.5, n - 0.5)
        if (v < lo or v > hi) and sample == "REFLECT":
            return reflect(v, lo, hi)
        return v

    def tap(r, c):
        if 0 <= r < rows and 0 <= c < cols:
            return image[r][c]
        if sample == "FILL":
            return 0.0
        if sample == "CLAMP":
            return image[min(max(r, 0), rows - 1)][min(max(c, 0), cols - 1)]
        lo_r, hi_r = (0, rows - 1) if align else (-0.5, rows - 0.5)
        lo_c, hi_c = (0, cols - 1) if align else (-0.5, cols - 0.5)
        r2 = int(min(max(round(reflect(r, lo_r, hi_r)), 0), rows - 1))
        c2 = int(min(max(round(reflect(c, lo_c, hi_c)), 0), cols - 1))
        return image[r2][c2]

    x, y = adjust(coordinate(gx, cols), cols), adjust(coordinate(gy, rows), rows)
    if mode == "NEAREST":
        return tap(round(y), round(x))  # Python's round: half to even
    x0, y0 = math.floor(x), math.floor(y)
    if mode == "LINEAR":
        tx, ty = x - x0, y - y0
        return ((1 - ty) * ((1 - tx) * tap(y0, x0) + tx * tap(y0, x0 + 1))
                + ty * ((1 - tx) * tap(y0 + 1, x0) + tx * tap(y0 + 1, x0 + 1)))
    return sum(keys(y - r, -0.75) * keys(x - c, -0.75) * tap(r, c)
               for r in range(y0 - 1, y0 + 3) for c in range(x0 - 1, x0 + 3))


@pytest.mark.parametrize("mode", ["NEAREST", "LINEAR", "CUBIC"])
@pytest.mark.parametrize("sample", ["FILL", "CLAMP", "REFLECT"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_against_loop(mode, sample, align):
    image = [[1.0, 5.0, -2.0, 3.0], [0.5, 4.0, 2.0, -1.0], [7.0, -3.0, 6.0, 2.5]]
    points = [(-1.7, 0.3), (-1.0, -1.0), (0.2, -0.45), (0.9, 1.3), (1.6, -1.9), (0.33, 0.71)]
    grid = f32(points).reshape(1, 1, -1, 2)
    out = grid_sample(f32([[image]]), grid, mode=mode, align=align, sample=sample)
    expected = [grid_sample_loop(image, gx, gy, mode, align, sample) for gx, gy in points]
    assert out == pytest.approx(expected, abs=1e-5)


# --- through TensorRT's API: the snapshot records every attribute these kinds read ---


def trt_network(add_layer, **inputs):
    """Network inputs ``inputs``, one layer added by ``add_layer(net, tensors)``, every
    output marked; snapshot and run it. Returns the outputs in order."""
    builder = trt.Builder(make_logger())
    net = builder.create_network(0)
    tensors = {name: net.add_input(name, to_trt_dtype(v.dtype), tuple(v.shape))
               for name, v in inputs.items()}
    layer = add_layer(net, tensors)
    for i in range(layer.num_outputs):
        net.mark_output(layer.get_output(i))
    return run_snapshot(take_snapshot(net, {}), inputs)


def test_api_pooling_blend_same_lower_and_round_up():
    def blend(net, t):
        layer = net.add_pooling_nd(t["x"], trt.PoolingType.MAX_AVERAGE_BLEND, (2, 2))
        layer.blend_factor = 0.25
        return layer

    (out,) = trt_network(blend, x=f32([[[[1, 2], [3, 4]]]]))
    assert out.flatten().tolist() == [3.625]  # 0.75 * max 4 + 0.25 * average 2.5

    def round_up(net, t):
        layer = net.add_pooling_nd(t["x"], trt.PoolingType.AVERAGE, (1, 2))
        layer.stride_nd, layer.pre_padding = (1, 2), (0, 1)
        layer.padding_mode = trt.PaddingMode.EXPLICIT_ROUND_UP
        layer.average_count_excludes_padding = True
        return layer

    # the 1-D case of test_average_pooling_modes: windows [pad,1] [2,3] [4,past]
    (out,) = trt_network(round_up, x=f32([[[[1, 2, 3, 4]]]]))
    assert out.flatten().tolist() == [1, 2.5, 4]


def test_api_convolution_same_upper_dilated_and_deconvolution_same_lower():
    kernel = np.ones((1, 1, 1, 2), np.float32)
    deconv_kernel = np.array([1, 10, 100], np.float32).reshape(1, 1, 1, 3)

    def conv(net, t):
        layer = net.add_convolution_nd(t["x"], 1, (1, 2), trt.Weights(kernel))
        layer.dilation_nd, layer.padding_mode = (1, 2), trt.PaddingMode.SAME_UPPER
        return layer

    (out,) = trt_network(conv, x=f32([[[[1, 2, 3, 4, 5]]]]))
    assert out.flatten().tolist() == [2, 4, 6, 8, 4]  # as in test_convolution_padding_modes

    def deconv(net, t):
        layer = net.add_deconvolution_nd(t["x"], 1, (1, 3), trt.Weights(deconv_kernel))
        layer.stride_nd, layer.padding_mode = (1, 2), trt.PaddingMode.SAME_LOWER
        return layer

    (out,) = trt_network(deconv, x=f32([[[[1, 2]]]]))
    assert out.flatten().tolist() == [10, 102, 20, 200]


def test_api_group_normalization_v1_per_group_and_v2_per_channel_scale():
    x = f32([1, 3, 2, 6]).reshape(1, 4, 1, 1)  # groups [1, 3 | 2, 6] -> [-1, 1 | -1, 1]

    def v1(net, t):
        layer = net.add_normalization(t["x"], t["s"], t["b"], (1 << 2) | (1 << 3))
        layer.num_groups, layer.epsilon = 2, 0.0
        return layer

    scale, bias = f32([1, 2]).reshape(1, 2, 1, 1), f32([0, 1]).reshape(1, 2, 1, 1)
    (out,) = trt_network(v1, x=x, s=scale, b=bias)
    assert out.flatten().tolist() == [-1, 1, -1, 3]

    def v2(net, t):
        layer = net.add_normalization_v2(t["x"], t["s"], t["b"], (1 << 2) | (1 << 3))
        layer.num_groups, layer.epsilon = 2, 0.0
        return layer

    scale, bias = f32([1, 2, 3, 4]).reshape(1, 4, 1, 1), f32([0, 0, 0, 1]).reshape(1, 4, 1, 1)
    (out,) = trt_network(v2, x=x, s=scale, b=bias)
    assert out.flatten().tolist() == [-1, 2, -3, 5]


def test_api_lrn_and_nms():
    def lrn(net, t):
        return net.add_lrn(t["x"], 3, 1.0, 1.0, 0.1)

    x = torch.arange(5, dtype=torch.float32).reshape(1, 5, 1, 1)
    (out,) = trt_network(lrn, x=x)
    assert out.flatten()[2].item() == pytest.approx(2 / (0.1 + 14 / 3))  # channels 1..3

    def nms(net, t):
        layer = net.add_nms(t["boxes"], t["scores"], t["limit"])
        layer.set_input(3, t["iou"])
        layer.set_input(4, t["score"])
        layer.topk_box_limit = 3
        layer.indices_type = trt.int64
        return layer

    selected, count = trt_network(nms, boxes=BOXES, scores=SCORES,
                                  limit=torch.tensor(2, dtype=torch.int32), iou=f32(0.5),
                                  score=f32(0.15))
    # as test_nms_limits_and_thresholds with topk 3
    assert selected.dtype == torch.int64 and selected.tolist() == [[0, 0, 0], [0, 1, 1]]
    assert count.item() == 2


def test_api_resize_cubic_coefficient_and_exclude_outside():
    def cubic(net, t):
        layer = net.add_resize(t["x"])
        layer.shape = (1, 7)
        layer.resize_mode = trt.InterpolationMode.CUBIC
        layer.coordinate_transformation = trt.ResizeCoordinateTransformation.ALIGN_CORNERS
        layer.cubic_coeff, layer.exclude_outside = -0.5, True
        return layer

    (out,) = trt_network(cubic, x=f32([[0, 0, 16, 0]]))
    # as test_resize_cubic_coefficient_by_hand
    assert out[0, 1].item() == pytest.approx(-1 / 1.0625)
    assert out[0, 3].item() == pytest.approx(9.0)
