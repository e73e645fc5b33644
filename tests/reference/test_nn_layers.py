"""Reference CONVOLUTION, DECONVOLUTION, POOLING, NORMALIZATION, MATRIX_MULTIPLY, RESIZE and
PARAMETRIC_RELU layers against hand-derived values (worked out by hand from TensorRT's
documented formulas; the derivation is in the comment next to each expectation)."""

import pytest
import torch

from torch_trt_ref.runtime.reference.registry import REFERENCE_LAYERS

NEG_INF = float("-inf")


def run(kind, inputs, **attrs):
    (out,) = REFERENCE_LAYERS[kind].run(list(inputs), **attrs)
    return out


def f32(values):
    return torch.tensor(values, dtype=torch.float32)


def conv(x, kernel, bias=None, out_maps=1, ksize=(2, 2), stride=(1, 1), pre=(0, 0),
         post=(0, 0), groups=1, kind="CONVOLUTION"):
    return run(kind, [x], num_output_maps=out_maps, kernel_size_nd=ksize, stride_nd=stride,
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
    return run("POOLING", [x], type=kind, window_size_nd=window, stride_nd=stride,
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
    out = run("NORMALIZATION", [x, f32([[[1, 2]]]), f32([[[0, 0.5]]])], axes=1 << 2,
              epsilon=0.0, num_groups=1, compute_precision=None)
    assert torch.equal(out, f32([[[-1, 2.5], [-1, 2.5]]]))


def test_normalization_groups_scale_per_group():
    # channels [1, 3 | 2, 6] in 2 groups -> [-1, 1 | -1, 1]; group scale [1, 2], bias [0, 1]
    x = f32([1, 3, 2, 6]).reshape(1, 4, 1, 1)
    scale, bias = f32([1, 2]).reshape(1, 2, 1, 1), f32([0, 1]).reshape(1, 2, 1, 1)
    out = run("NORMALIZATION", [x, scale, bias], axes=(1 << 2) | (1 << 3), epsilon=0.0,
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
    assert torch.equal(run("MATRIX_MULTIPLY", [a, b], op0=op0, op1=op1), expected)


def test_matrix_multiply_broadcasts_batch():
    batch = torch.stack([A, 2 * A])  # (2, 2, 2) @ (2, 2)
    out = run("MATRIX_MULTIPLY", [batch, B], op0="NONE", op1="NONE")
    assert torch.equal(out, torch.stack([f32([[19, 22], [43, 50]]), f32([[38, 44], [86, 100]])]))


def resize(x, shape=(), scales=(), mode="NEAREST", transform="ASYMMETRIC", rounding="FLOOR",
           selector="FORMULA"):
    return run("RESIZE", [x], shape=shape, scales=scales, resize_mode=mode,
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
    out = run("PARAMETRIC_RELU", [f32([-2, 3, 0]), f32([0.5, 0.5, 0.5])])
    assert torch.equal(out, f32([-1, 3, 0]))


def grid_sample(grid, mode="LINEAR", align=True, sample="FILL"):
    x = f32([[[[1, 2], [3, 4]]]])
    out = run("GRID_SAMPLE", [x, f32(grid).reshape(1, 1, -1, 2)], interpolation_mode=mode,
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
