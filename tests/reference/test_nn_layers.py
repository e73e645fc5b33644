"""Reference CONVOLUTION, DECONVOLUTION, POOLING, NORMALIZATION, LRN, MATRIX_MULTIPLY, RESIZE
and PARAMETRIC_RELU layers against hand-derived values (worked out by hand from TensorRT's
documented formulas; the derivation is in the comment next to each expectation)."""

import itertools
import math

import pytest
import torch

from .conftest import f32, run_one

NEG_INF = float("-inf")


def conv(x, kernel, bias=None, out_maps=1, ksize=(2, 2), stride=(1, 1), pre=(0, 0),
         post=(0, 0), groups=1, kind="CONVOLUTION"):
    return run_one(kind, [x], num_output_maps=out_maps, kernel_size_nd=ksize, stride_nd=stride,
                   dilation_nd=(1,) * len(ksize), num_groups=groups, pre_padding=pre,
                   post_padding=post, padding_mode="EXPLICIT_ROUND_DOWN", kernel=kernel,
                   bias=bias)


GRID = f32([[[[1, 2, 3], [4, 5, 6], [7, 8, 9]]]])
DIAG = f32([1, 0, 0, -1])  # out = x[i, j] - x[i + 1, j + 1]


def test_convolution_cross_correlation_with_bias():
    # every 2x2 window: x[i, j] - x[i+1, j+1] = -4, plus bias 0.5
    assert torch.equal(conv(GRID, DIAG, f32([0.5])), torch.full((1, 1, 2, 2), -3.5))


def test_convolution_pre_padding_and_stride():
    # zero row/col in front; windows at (0,0) (0,2) (2,0) (2,2) of the padded 4x4 grid:
    # 0-1, 0-3, 0-7, 5-9, each + 0.5
    out = conv(GRID, DIAG, f32([0.5]), stride=(2, 2), pre=(1, 1))
    assert torch.equal(out, f32([[[[-0.5, -2.5], [-6.5, -3.5]]]]))


def test_convolution_groups():
    # channel 0 * 3, channel 1 * 4 (one 1x1 filter per group)
    out = conv(f32([1, 2]).reshape(1, 2, 1, 1), f32([3, 4]), out_maps=2, ksize=(1, 1),
               groups=2)
    assert torch.equal(out.flatten(), f32([3, 8]))


def test_deconvolution_scatter_and_padding_crop():
    x, kernel = f32([[[[1, 2]]]]), f32([1, 10])
    # each input scatters [1, 10] * value at stride 1: [1, 10 + 2, 20]
    full = conv(x, kernel, ksize=(1, 2), kind="DECONVOLUTION")
    assert torch.equal(full.flatten(), f32([1, 12, 20]))
    # pre padding removes leading outputs
    cropped = conv(x, kernel, ksize=(1, 2), pre=(0, 1), kind="DECONVOLUTION")
    assert torch.equal(cropped.flatten(), f32([12, 20]))
    # stride 2: [1, 10] at 0 and [2, 20] at 2, post padding drops the last column
    strided = conv(x, kernel, ksize=(1, 2), stride=(1, 2), post=(0, 1), kind="DECONVOLUTION")
    assert torch.equal(strided.flatten(), f32([1, 10, 2]))


def pool(x, kind, window=(2, 2), stride=(1, 1), pre=(0, 0), post=(0, 0), exclude=False):
    return run_one("POOLING", [x], type=kind, window_size_nd=window, stride_nd=stride,
                   pre_padding=pre, post_padding=post, padding_mode="EXPLICIT_ROUND_DOWN",
                   average_count_excludes_padding=exclude)


def test_max_pooling_ignores_padding():
    x = f32([[[[-1, -5, -2], [-4, -3, -6]]]])
    # padding is -inf, so a window over padding and {-1, -4} gives -1 (not 0)
    out = pool(x, "MAX", pre=(0, 1))
    assert torch.equal(out, f32([[[[-1, -1, -2]]]]))


@pytest.mark.parametrize("exclude,expected", [
    (False, [[0.25, 0.75], [1.0, 2.5]]),  # sums 1, 3, 4, 10 over the window area 4
    (True, [[1.0, 1.5], [2.0, 2.5]]),  # same sums over the non-padding counts 1, 2, 2, 4
])
def test_average_pooling_padding_count(exclude, expected):
    out = pool(f32([[[[1, 2], [3, 4]]]]), "AVERAGE", pre=(1, 1), exclude=exclude)
    assert torch.equal(out, f32([[expected]]))


def test_normalization_last_axis_with_scale_and_bias():
    # rows [1, 3] (mean 2, var 1) and [2, 6] (mean 4, var 4) both normalize to [-1, 1];
    # then * [1, 2] + [0, 0.5]
    x = f32([[[1, 3], [2, 6]]])
    out = run_one("NORMALIZATION", [x, f32([[[1, 2]]]), f32([[[0, 0.5]]])], axes=1 << 2,
                  epsilon=0.0, num_groups=1, compute_precision=None)
    assert torch.equal(out, f32([[[-1, 2.5], [-1, 2.5]]]))


def test_normalization_groups_scale_per_group():
    # channels [1, 3 | 2, 6] in 2 groups -> [-1, 1 | -1, 1]; group scale [1, 2], bias [0, 1]
    x = f32([1, 3, 2, 6]).reshape(1, 4, 1, 1)
    scale, bias = f32([1, 2]).reshape(1, 2, 1, 1), f32([0, 1]).reshape(1, 2, 1, 1)
    out = run_one("NORMALIZATION", [x, scale, bias], axes=(1 << 2) | (1 << 3), epsilon=0.0,
                  num_groups=2, compute_precision=None)
    assert torch.equal(out.flatten(), f32([-1, 1, -1, 3]))


A, B = f32([[1, 2], [3, 4]]), f32([[5, 6], [7, 8]])


@pytest.mark.parametrize("a,op0,b,op1,expected", [
    (A, "NONE", B, "NONE", f32([[19, 22], [43, 50]])),
    (A, "NONE", B, "TRANSPOSE", f32([[17, 23], [39, 53]])),  # rows of A . rows of B
    (A, "TRANSPOSE", B, "NONE", f32([[26, 30], [38, 44]])),  # columns of A . columns of B
    (A, "NONE", f32([1, -1]), "VECTOR", f32([-1, -1])),
    (f32([1, 2]), "VECTOR", f32([3, 4]), "VECTOR", f32(11)),
])
def test_matrix_multiply(a, op0, b, op1, expected):
    assert torch.equal(run_one("MATRIX_MULTIPLY", [a, b], op0=op0, op1=op1), expected)


def test_matrix_multiply_broadcasts_batch():
    batch = torch.stack([A, 2 * A])  # (2, 2, 2) @ (2, 2)
    out = run_one("MATRIX_MULTIPLY", [batch, B], op0="NONE", op1="NONE")
    assert torch.equal(out, torch.stack([f32([[19, 22], [43, 50]]), f32([[38, 44], [86, 100]])]))


def resize(x, shape=(), scales=(), mode="NEAREST", transform="ASYMMETRIC", rounding="FLOOR",
           selector="FORMULA"):
    return run_one("RESIZE", [x], shape=shape, scales=scales, resize_mode=mode,
                   coordinate_transformation=transform, nearest_rounding=rounding,
                   selector_for_single_pixel=selector, cubic_coeff=-0.75, exclude_outside=False)


RAMP3 = f32([[[0, 1, 2]]])


@pytest.mark.parametrize("kw,expected", [
    # src = dst * 3/5 = 0, .6, 1.2, 1.8, 2.4 -> floor
    ({"shape": (1, 1, 5)}, [0, 0, 1, 1, 2]),
    # src = (dst + .5) * 3/5 - .5 = -.2, .4, 1, 1.6, 2.2 -> round half up
    ({"shape": (1, 1, 5), "transform": "HALF_PIXEL", "rounding": "HALF_UP"}, [0, 0, 1, 2, 2]),
    # scales: out = floor(3 * 2) = 6, src = dst * 3/6
    ({"scales": (1.0, 1.0, 2.0)}, [0, 0, 1, 1, 2, 2]),
    # one output pixel with UPPER: the first input
    ({"shape": (1, 1, 1), "transform": "ALIGN_CORNERS", "selector": "UPPER"}, [0]),
    # align corners 3 -> 5: src = dst * 2/4 = 0, .5, 1, 1.5, 2 -> ceil
    ({"shape": (1, 1, 5), "transform": "ALIGN_CORNERS", "rounding": "CEIL"}, [0, 1, 1, 2, 2]),
])
def test_resize_nearest(kw, expected):
    assert torch.equal(resize(RAMP3, **kw).flatten(), f32(expected))


@pytest.mark.parametrize("transform,size,expected", [
    # src = (dst + .5)/2 - .5 = -.25 (clamped to 0), .25, .75, 1.25 (clamped to 1)
    ("HALF_PIXEL", 4, [0, 1, 3, 4]),
    ("ALIGN_CORNERS", 3, [0, 2, 4]),  # src = dst * 1/2
])
def test_resize_linear(transform, size, expected):
    out = resize(f32([[[0, 4]]]), shape=(1, 1, size), mode="LINEAR", transform=transform)
    assert torch.equal(out.flatten(), f32(expected))


def test_resize_cubic_keys_kernel():
    # align corners 4 -> 7: src = dst / 2. At t = .5 the A = -0.75 Keys weights are
    # (-0.09375, 0.59375, 0.59375, -0.09375); indices are clamped to the edge.
    x = f32([[[[0, 0, 16, 0]]]])
    out = resize(x, shape=(1, 1, 1, 7), mode="CUBIC", transform="ALIGN_CORNERS")
    assert torch.allclose(out.flatten(), f32([0, -1.5, 0, 9.5, 16, 9.5, 0]), atol=1e-5)


def test_parametric_relu():
    out = run_one("PARAMETRIC_RELU", [f32([-2, 3, 0]), f32([0.5, 0.5, 0.5])])
    assert torch.equal(out, f32([-1, 3, 0]))


def grid_sample(grid, mode="LINEAR", align=True, sample="FILL"):
    x = f32([[[[1, 2], [3, 4]]]])
    out = run_one("GRID_SAMPLE", [x, f32(grid).reshape(1, 1, -1, 2)], interpolation_mode=mode,
                  align_corners=align, sample_mode=sample)
    return out.flatten()


@pytest.mark.parametrize("kw,grid,expected", [
    # align corners: (x, y) = (-1, -1) is pixel (0, 0), (1, -1) pixel column 1 of row 0,
    # (0, 0) the centre: the mean of all four
    ({}, [[-1, -1], [1, -1], [0, 0]], [1, 2, 2.5]),
    # without align corners -1 is the outer edge, half a pixel before pixel 0: bilinear
    # weight 1/4 on pixel (0, 0) and zeros outside (FILL), or the border value (CLAMP)
    ({"align": False}, [[-1, -1]], [0.25]),
    ({"align": False, "sample": "CLAMP"}, [[-1, -1]], [1]),
    # nearest: (0.1, 0.1) -> pixel coordinates (0.55, 0.55) -> rounded to (1, 1)
    ({"mode": "NEAREST"}, [[0.1, 0.1]], [4]),
])
def test_grid_sample(kw, grid, expected):
    assert torch.allclose(grid_sample(grid, **kw), f32(expected))


# --- padding modes (TensorRT's PaddingMode formulas), pooling types, normalization, LRN ---


def conv1d(values, kernel, mode, stride=1, dilation=1, pre=0, post=0, kind="CONVOLUTION"):
    x = f32(values).reshape(1, 1, -1)
    out = run_one(kind, [x], num_output_maps=1, kernel_size_nd=(len(kernel),), stride_nd=(stride,),
                  dilation_nd=(dilation,), num_groups=1, pre_padding=(pre,), post_padding=(post,),
                  padding_mode=mode, kernel=f32(kernel), bias=None)
    return out.flatten().tolist()


@pytest.mark.parametrize("mode,kw,expected", [
    # I=5, S=1, F=2: P = floor(4/1)*1 + 2 - 5 = 1; SAME_UPPER puts it after (B=0, A=1):
    # windows [1,2] [2,3] [3,4] [4,5] [5,0]
    ("SAME_UPPER", {}, [3, 5, 7, 9, 5]),
    # SAME_LOWER puts it before (B=1, A=0): [0,1] [1,2] ... [4,5]
    ("SAME_LOWER", {}, [1, 3, 5, 7, 9]),
    # dilation 2: DK = 3, P = 4 + 3 - 5 = 2, B = A = 1 over [0,1,2,3,4,5,0], taps j, j+2
    ("SAME_UPPER", {"dilation": 2}, [2, 4, 6, 8, 4]),
    # stride 2: O = ceil(5/2) = 3, P = floor(4/2)*2 + 2 - 5 = 1 -> A = 1: [1,2] [3,4] [5,0]
    ("SAME_UPPER", {"stride": 2}, [3, 7, 5]),
    # no padding, S=2: ROUND_DOWN O = floor(3/2) + 1 = 2; ROUND_UP O = ceil(3/2) + 1 = 3,
    # the last window [5, past the end] reads only 5
    ("EXPLICIT_ROUND_DOWN", {"stride": 2}, [3, 7]),
    ("EXPLICIT_ROUND_UP", {"stride": 2}, [3, 7, 5]),
    # SAME overrides explicit padding
    ("SAME_LOWER", {"pre": 3, "post": 3}, [1, 3, 5, 7, 9]),
])
def test_convolution_padding_modes(mode, kw, expected):
    assert conv1d([1, 2, 3, 4, 5], [1, 1], mode, **kw) == expected


@pytest.mark.parametrize("mode,kw,expected", [
    # x = [1, 2], kernel [1, 10, 100], S=2: full output (2-1)*2 + 3 = 5 long,
    # [1, 10, 100] + [0, 0, 2, 20, 200] = [1, 10, 102, 20, 200]
    ("EXPLICIT_ROUND_DOWN", {}, [1, 10, 102, 20, 200]),
    ("EXPLICIT_ROUND_UP", {"pre": 1}, [10, 102, 20, 200]),  # B = 1 cropped in front
    # SAME: P = max(DK - S, 0) = 1, O = min(I*S, (I-1)*S + DK) = 4; UPPER crops the back
    ("SAME_UPPER", {}, [1, 10, 102, 20]),
    ("SAME_LOWER", {}, [10, 102, 20, 200]),
    # kernel [1, 10], dilation 3, S=1 (TensorRT-RTX rejects strided dilated deconvolution):
    # DK = 4, full output (2-1) + 4 = 5: [1, 0, 0, 10, 0] + [0, 2, 0, 0, 20]
    # = [1, 2, 0, 10, 20]; P = 3, UPPER B=1 A=2, LOWER B=2 A=1
    ("SAME_UPPER", {"kernel": [1, 10], "dilation": 3, "stride": 1}, [2, 0]),
    ("SAME_LOWER", {"kernel": [1, 10], "dilation": 3, "stride": 1}, [0, 10]),
])
def test_deconvolution_padding_modes(mode, kw, expected):
    kw = {"kernel": [1, 10, 100], "stride": 2, **kw}
    kernel = kw.pop("kernel")
    assert conv1d([1, 2], kernel, mode, kind="DECONVOLUTION", **kw) == expected


def pool1d(values, kind, mode, window=2, stride=2, pre=0, post=0, exclude=False, blend=0.0):
    out = run_one("POOLING", [f32(values).reshape(1, 1, -1)], type=kind, window_size_nd=(window,),
                  stride_nd=(stride,), pre_padding=(pre,), post_padding=(post,),
                  padding_mode=mode, average_count_excludes_padding=exclude, blend_factor=blend)
    return out.flatten().tolist()


@pytest.mark.parametrize("mode,exclude,expected", [
    # I=4, B=1, F=S=2, ROUND_UP: M=5, O = ceil(3/2) + 1 = 3, windows [pad,1] [2,3] [4,past]
    # with sums 1, 5, 4. The denominator is the overlap with the padded input (2, 2, 1:
    # the part past M is not padding) or with the unpadded input (1, 2, 1).
    ("EXPLICIT_ROUND_UP", False, [0.5, 2.5, 4]),
    ("EXPLICIT_ROUND_UP", True, [1, 2.5, 4]),
    ("EXPLICIT_ROUND_DOWN", False, [0.5, 2.5]),  # O = floor(3/2) + 1 = 2
    # SAME_LOWER, I=4, S=2, F=2: P = floor(3/2)*2 + 2 - 4 = 0: windows [1,2] [3,4]
    ("SAME_LOWER", False, [1.5, 3.5]),
])
def test_average_pooling_modes(mode, exclude, expected):
    assert pool1d([1, 2, 3, 4], "AVERAGE", mode, pre=1, exclude=exclude) == expected


@pytest.mark.parametrize("mode,window,expected", [
    # x = [-1, -5, -2, -4, -3] (negative: a 0 from padding would win). F=3, S=1:
    # P = 4 + 3 - 5 = 2, B = A = 1: [p,-1,-5] [-1,-5,-2] [-5,-2,-4] [-2,-4,-3] [-4,-3,p]
    ("SAME_UPPER", 3, [-1, -1, -2, -2, -3]),
    # F=2: P = 1. UPPER (B=0, A=1): [-1,-5] [-5,-2] [-2,-4] [-4,-3] [-3,p]
    ("SAME_UPPER", 2, [-1, -2, -2, -3, -3]),
    # LOWER (B=1, A=0): [p,-1] [-1,-5] [-5,-2] [-2,-4] [-4,-3]
    ("SAME_LOWER", 2, [-1, -1, -2, -2, -3]),
])
def test_max_pooling_same_modes(mode, window, expected):
    assert pool1d([-1, -5, -2, -4, -3], "MAX", mode, window=window, stride=1) == expected


def test_max_average_blend():
    # window 2x2 over [[1, 2], [3, 4]]: max 4, average 2.5; 0.75 * 4 + 0.25 * 2.5 = 3.625
    out = run_one("POOLING", [f32([[[[1, 2], [3, 4]]]])], type="MAX_AVERAGE_BLEND",
                  window_size_nd=(2, 2), stride_nd=(1, 1), pre_padding=(0, 0),
                  post_padding=(0, 0), padding_mode="EXPLICIT_ROUND_DOWN",
                  average_count_excludes_padding=False, blend_factor=0.25)
    assert out.flatten().tolist() == [3.625]


def test_pooling_3d():
    # a 2x2x2 window over 0..7: max 7, average 3.5
    x = torch.arange(8, dtype=torch.float32).reshape(1, 1, 2, 2, 2)
    for kind, expected in (("MAX", 7.0), ("AVERAGE", 3.5)):
        out = run_one("POOLING", [x], type=kind, window_size_nd=(2, 2, 2), stride_nd=(1, 1, 1),
                      pre_padding=(0, 0, 0), post_padding=(0, 0, 0),
                      padding_mode="EXPLICIT_ROUND_DOWN", average_count_excludes_padding=False)
        assert out.flatten().tolist() == [expected]


def window_loop(x, kind, mode, f, s, d, pre, post, exclude):
    """Independent float64 loop: TensorRT's PaddingMode formulas, then every window."""
    rows, cols = x.shape
    geometry = []
    for i, b, a in ((rows, pre, post), (cols, pre, post)):
        dk = 1 + d * (f - 1)
        if mode.startswith("SAME"):
            o = math.ceil(i / s)
            p = max(math.floor((i - 1) / s) * s + dk - i, 0)
            b = p // 2 if mode == "SAME_UPPER" else p - p // 2
            a = p - b
        else:
            rounding = math.ceil if mode == "EXPLICIT_ROUND_UP" else math.floor
            o = rounding((i + b + a - dk) / s) + 1
        geometry.append((i, b, a, o))
    (ri, rb, ra, ro), (ci, cb, ca, co) = geometry
    out = torch.zeros(ro, co, dtype=torch.float64)
    for r, c in itertools.product(range(ro), range(co)):
        values, count = [], 0  # values: the window's input elements
        for kr, kc in itertools.product(range(f), range(f)):
            y, z = r * s - rb + kr * d, c * s - cb + kc * d
            inside = 0 <= y < ri and 0 <= z < ci
            in_padded = -rb <= y < ri + ra and -cb <= z < ci + ca
            count += inside if exclude else in_padded
            if inside:
                values.append(float(x[y, z]))
        if kind == "MAX":
            out[r, c] = max(values)
        elif kind == "AVERAGE":
            out[r, c] = sum(values) / count
        else:  # CONVOLUTION with an all-ones kernel: padding adds zeros
            out[r, c] = sum(values)
    return out


MODES = ["EXPLICIT_ROUND_DOWN", "EXPLICIT_ROUND_UP", "SAME_UPPER", "SAME_LOWER"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind,f,s,d,pre,post,exclude", [
    ("MAX", 3, 2, 1, 1, 0, False),
    ("AVERAGE", 3, 2, 1, 1, 0, False),
    ("AVERAGE", 2, 3, 1, 1, 0, True),
    ("CONVOLUTION", 3, 2, 2, 1, 2, False),
    ("CONVOLUTION", 2, 3, 1, 0, 1, False),
])
def test_windows_against_loop(mode, kind, f, s, d, pre, post, exclude):
    x = torch.randn(7, 6, generator=torch.Generator().manual_seed(0))
    if kind == "CONVOLUTION":
        out = run_one(kind, [x.reshape(1, 1, 7, 6)], num_output_maps=1, kernel_size_nd=(f, f),
                      stride_nd=(s, s), dilation_nd=(d, d), num_groups=1, pre_padding=(pre, pre),
                      post_padding=(post, post), padding_mode=mode, kernel=torch.ones(f * f),
                      bias=None)
    else:
        out = run_one("POOLING", [x.reshape(1, 1, 7, 6)], type=kind, window_size_nd=(f, f),
                      stride_nd=(s, s), pre_padding=(pre, pre), post_padding=(post, post),
                      padding_mode=mode, average_count_excludes_padding=exclude)
    expected = window_loop(x.double(), kind, mode, f, s, d, pre, post, exclude)
    assert torch.allclose(out[0, 0].double(), expected, atol=1e-5)


def norm(x, scale, bias, axes, groups=1, eps=0.0):
    return run_one("NORMALIZATION", [x, scale, bias], axes=axes, epsilon=eps, num_groups=groups,
                   compute_precision=None)


def test_group_normalization_per_channel_scale():
    # add_normalization_v2: scale and bias [1, C, 1, 1]. Groups [1, 3 | 2, 6] normalize to
    # [-1, 1 | -1, 1]; * [1, 2, 3, 4] + [0, 0, 0, 1] = [-1, 2, -3, 5]
    x = f32([1, 3, 2, 6]).reshape(1, 4, 1, 1)
    out = norm(x, f32([1, 2, 3, 4]).reshape(1, 4, 1, 1), f32([0, 0, 0, 1]).reshape(1, 4, 1, 1),
               axes=(1 << 2) | (1 << 3), groups=2)
    assert torch.equal(out.flatten(), f32([-1, 2, -3, 5]))


def test_group_normalization_reduces_group_and_spatial_dims():
    # 2 groups of 2 channels x 2 positions: group 0 = [0, 2, 4, 6] (mean 3, var 5)
    # and group 1 = [1, 3, 1, 3] (mean 2, var 1)
    x = f32([0, 2, 4, 6, 1, 3, 1, 3]).reshape(1, 4, 2)
    ones, zeros = torch.ones(1, 4, 1), torch.zeros(1, 4, 1)
    out = norm(x, ones, zeros, axes=1 << 2, groups=2)
    expected = torch.cat([(f32([0, 2, 4, 6]) - 3) / math.sqrt(5), f32([-1, 1, -1, 1])])
    assert torch.allclose(out.flatten(), expected)


def test_instance_normalization_per_channel_scale():
    # each channel over its spatial dims: [1, 3] and [2, 6] -> [-1, 1]; scale [2, 3],
    # bias [1, 0], epsilon 1 on channel 0's variance 1: [-1, 1] / sqrt(2)
    x = f32([[1, 3], [2, 6]]).reshape(1, 2, 1, 2)
    out = norm(x, f32([2, 3]).reshape(1, 2, 1, 1), f32([1, 0]).reshape(1, 2, 1, 1),
               axes=(1 << 2) | (1 << 3), eps=0.0)
    assert torch.equal(out.flatten(), f32([-1, 3, -3, 3]))


def test_layer_normalization_over_non_adjacent_axes():
    # axes {0, 2} of shape (2, 2, 2): per middle index j the four values x[:, j, :];
    # j = 0: [1, 3, 5, 7] (mean 4, var 5); j = 1: [0, 0, 0, 4] (mean 1, var 3)
    x = f32([[[1, 3], [0, 0]], [[5, 7], [0, 4]]])
    out = norm(x, torch.ones(1, 1, 1), torch.zeros(1, 1, 1), axes=0b101)
    assert torch.allclose(out[:, 0, :].flatten(), (f32([1, 3, 5, 7]) - 4) / math.sqrt(5))
    assert torch.allclose(out[:, 1, :].flatten(), (f32([0, 0, 0, 4]) - 1) / math.sqrt(3))


@pytest.mark.parametrize("window,expected", [
    # channels hold 0, 1, 2, 3, 4; window 3, alpha 1, beta 1, k 0.1:
    # y_c = x_c / (0.1 + 1/3 * (sum of x^2 over c-1..c+1, clipped)); sums 1, 5, 14, 29, 25
    (3, [0, 1 / (0.1 + 5 / 3), 2 / (0.1 + 14 / 3), 3 / (0.1 + 29 / 3), 4 / (0.1 + 25 / 3)]),
    # window 1: only the channel itself, x / (0.1 + x^2)
    (1, [0, 1 / 1.1, 2 / 4.1, 3 / 9.1, 4 / 16.1]),
])
def test_lrn_cross_channel(window, expected):
    x = torch.arange(5, dtype=torch.float32).reshape(1, 5, 1, 1).expand(1, 5, 2, 2)
    out = run_one("LRN", [x], window_size=window, alpha=1.0, beta=1.0, k=0.1)
    assert torch.allclose(out[0, :, 1, 0], f32(expected))
    assert torch.equal(out[..., 0, 0], out[..., 1, 1])


def test_lrn_beta_and_rank_3():
    # rank 3 (C, H, W): channel dim 0. Channels [3, 4], window 3 sees both: sum 25;
    # (1 + 2/3 * 25) ^ 0.5 = sqrt(53/3)
    x = f32([3, 4]).reshape(2, 1, 1)
    out = run_one("LRN", [x], window_size=3, alpha=2.0, beta=0.5, k=1.0)
    assert torch.allclose(out.flatten(), f32([3, 4]) / math.sqrt(53 / 3))
