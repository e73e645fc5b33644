"""Int-list arguments read as ATen reads them (torch_trt_ref.conversion.args): a bare int or
a one-element list applies to every spatial dim, an empty pooling stride is the kernel size.
Models are compiled whole and judged against eager in float64, output shapes exact."""

import pytest
import torch
import torch.nn.functional as F

import torch_trt_ref
from torch_trt_ref.accuracy import judge, to_float64
from torch_trt_ref.conversion import args


class Call(torch.nn.Module):
    """``fn(x, *weights)`` with the weights as buffers (captured as constants)."""

    def __init__(self, fn, *weights):
        super().__init__()
        self.fn = fn
        for i, w in enumerate(weights):
            self.register_buffer(f"w{i}", w)

    def forward(self, x):
        return self.fn(x, *self.buffers())


def _w(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


CONV = {
    "conv2d_padding_1": (lambda x, w: F.conv2d(x, w, padding=[1]), (1, 3, 32, 32), (6, 3, 3, 3)),
    "conv2d_dilation_3": (lambda x, w: F.conv2d(x, w, dilation=[3], padding=[3]),
                          (1, 3, 16, 16), (6, 3, 3, 3)),
    "conv2d_stride_2_padding_int": (lambda x, w: F.conv2d(x, w, stride=[2], padding=1),
                                    (1, 3, 15, 16), (4, 3, 3, 3)),
    "conv1d_lists": (lambda x, w: F.conv1d(x, w, stride=[2], padding=[1], dilation=[2]),
                     (2, 3, 17), (4, 3, 3)),
    "conv3d_stride_2": (lambda x, w: F.conv3d(x, w, stride=[2]), (1, 2, 7, 8, 9), (3, 2, 3, 3, 3)),
    "conv3d_padding_1": (lambda x, w: F.conv3d(x, w, padding=[1]), (1, 2, 5, 6, 4),
                         (3, 2, 3, 3, 3)),
    "conv3d_dilation_2": (lambda x, w: F.conv3d(x, w, dilation=[2], padding=[2]),
                          (1, 2, 6, 6, 6), (3, 2, 3, 3, 3)),
    "conv_transpose2d_lists": (
        lambda x, w: F.conv_transpose2d(x, w, padding=[1], output_padding=[1], stride=[2]),
        (1, 4, 5, 6), (4, 3, 3, 3)),
    "conv_transpose1d_lists": (
        lambda x, w: F.conv_transpose1d(x, w, padding=[1], output_padding=[1], stride=[2]),
        (2, 4, 7), (4, 3, 3)),
    "conv_transpose3d_lists": (
        lambda x, w: F.conv_transpose3d(x, w, padding=[1], output_padding=[1], stride=[2]),
        (1, 2, 3, 4, 5), (2, 3, 3, 3, 3)),
    "conv_transpose2d_dilation_int": (
        lambda x, w: F.conv_transpose2d(x, w, padding=[2], dilation=2),
        (1, 4, 5, 6), (4, 3, 3, 3)),
    "max_pool2d_one_element": (lambda x: F.max_pool2d(x, [3], [2], [1]), (1, 3, 9, 8), None),
    "max_pool2d_empty_stride": (lambda x: F.max_pool2d(x, [2], []), (1, 3, 8, 6), None),
    "max_pool3d_one_element": (lambda x: F.max_pool3d(x, [3], [2], [1]), (1, 2, 7, 6, 5), None),
    "avg_pool2d_one_element": (lambda x: F.avg_pool2d(x, [3], [2], [1]), (1, 3, 9, 8), None),
    "avg_pool3d_one_element": (lambda x: F.avg_pool3d(x, [2], [1], [1]), (1, 2, 5, 6, 4), None),
    "avg_pool1d_list": (lambda x: F.avg_pool1d(x, [3], [2], [1]), (2, 3, 11), None),
    "max_pool1d_list": (lambda x: F.max_pool1d(x, [3], [2], [1]), (2, 3, 11), None),
}


@pytest.mark.parametrize("name", sorted(CONV))
def test_matches_eager_in_float64_and_converts_fully(name):
    fn, shape, weight_shape = CONV[name]
    weights = (_w(*weight_shape),) if weight_shape else ()
    model = Call(fn, *weights).eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    compiled = torch_trt_ref.compile(model, (x,), executor="reference", min_block_size=1)
    report = compiled.compile_report
    assert report.counts.get("torch", 0) == 0, report.render()
    with torch.no_grad():
        got, eager = compiled(x), model(x)
        reference = Call(fn, *to_float64(list(weights))).eval()(x.double())
    assert got.shape == eager.shape
    verdict = judge(got, eager, reference)
    assert verdict.passed, verdict.message


def test_conv2d_one_element_padding_shape_is_aten_shape():
    # hand-derived: 32 + 2 * 1 - 3 + 1 = 32 with padding 1 on both spatial dims
    model = Call(lambda x, w: F.conv2d(x, w, padding=[1]), _w(6, 3, 3, 3)).eval()
    x = torch.randn(1, 3, 30, 30)
    compiled = torch_trt_ref.compile(model, (x,), executor="reference", min_block_size=1)
    assert tuple(compiled(x).shape) == (1, 6, 30, 30)


@pytest.mark.parametrize("value,nd,expected", [
    (1, 3, [1, 1, 1]), ([2], 2, [2, 2]), ((1, 2), 2, [1, 2]), ([4, 5, 6], 3, [4, 5, 6]),
])
def test_per_dim_repeats_a_single_value(value, nd, expected):
    assert args.per_dim(value, nd) == expected


def test_per_dim_empty_is_the_default_and_a_wrong_length_raises():
    assert args.per_dim([], 2, "stride", default=[3]) == [3, 3]
    assert args.per_dim(None, 3, "stride", default=[2, 3, 4]) == [2, 3, 4]
    with pytest.raises(ValueError):
        args.per_dim([1, 2], 3, "padding")
    with pytest.raises(ValueError):
        args.per_dim([], 2, "padding")


def test_pool_params_empty_stride_is_the_kernel():
    p = args.pool_params([3, 2], [], [1], 1, 2)
    assert p == {"kernel": [3, 2], "stride": [3, 2], "padding": [1, 1], "dilation": [1, 1]}


def test_dims_as_aten_reductions_read_them():
    x = torch.arange(24.0).reshape(2, 3, 4)
    # empty dim list: every dim, as torch.sum(x, dim=[]) does
    assert args.dims([], 3, empty_means_all=True) == [0, 1, 2]
    assert torch.sum(x, dim=[]).item() == x.sum(dim=args.dims([], 3, True)).item()
    assert args.dims([-1, 0], 3) == [0, 2]
    assert args.dims(-1, 0) == []  # a scalar accepts dim -1 and has no dim to reduce
    with pytest.raises(ValueError):
        args.dims([3], 3)
    with pytest.raises(ValueError):
        args.dims([0, -3], 3)


# Scale factors are read as ATen reads them too: output size floor(in * scale) in double,
# coordinates mapped with 1 / scale (Note [Resize scales] in converters/resize.py).
class Interpolate(torch.nn.Module):
    def __init__(self, scale, mode):
        super().__init__()
        self.scale, self.mode = scale, mode

    def forward(self, x):
        return F.interpolate(x, scale_factor=self.scale, mode=self.mode) + 1


def _judged(compiled, model, x):
    with torch.no_grad():
        got, eager, reference = compiled(x), model(x), model(x.double())
    assert got.shape == eager.shape
    verdict = judge(got, eager, reference)
    assert verdict.passed, verdict.message


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear"])
def test_fractional_scale_factor_converts_and_matches_eager(mode):
    model, x = Interpolate(1.5, mode), torch.randn(1, 2, 5, 5)
    program = torch.export.export(model, (x,))  # keeps upsample_*.vec whole
    compiled = torch_trt_ref.compile(program, (x,), executor="reference", min_block_size=1)
    assert compiled.compile_report.counts.get("torch", 0) == 0, compiled.compile_report.render()
    _judged(compiled, model, x)


def test_fractional_scale_factor_over_a_dynamic_length():
    # 90 * 0.7 is 62.99999999999999 in double, so eager's output has 62 elements
    model = Interpolate(0.7, "nearest")
    spec = torch_trt_ref.Input(min_shape=(1, 2, 85), opt_shape=(1, 2, 90), max_shape=(1, 2, 95))
    compiled = torch_trt_ref.compile(model, (spec,), executor="reference", min_block_size=1)
    assert compiled.compile_report.counts.get("torch", 0) == 0, compiled.compile_report.render()
    for n in (85, 89, 90, 91, 95):
        x = torch.randn(1, 2, n)
        _judged(compiled, model, x)
    assert compiled(torch.randn(1, 2, 90)).shape[-1] == 62
