"""Declared ranges over which the traced graph holds only under a condition tying several
sizes together (Note [Conditions over several sizes]) or where eager raises at the declared
opt (Note [Tracing where eager runs]), issue 36 item 8: the compiled module matches eager
under the float64 rule at every declared size where eager runs, sizes down to 1, and raises
only where eager raises. Before, it refused every size where such a condition failed."""

import copy
import itertools

import pytest
import torch

import torch_trt_ref
from torch_trt_ref import Input, size_cover
from torch_trt_ref.accuracy import judge
from torch_trt_ref.capture import capture
from torch_trt_ref.size_conditions import holds, size_conditions


def sweep(model, compiled, shapes):
    """Judge ``compiled`` against eager at each input shape; where eager raises, the
    compiled module must raise too. Returns the shapes eager ran at."""
    ran = []
    gen = torch.Generator().manual_seed(0)
    model64 = copy.deepcopy(model).double()
    for shape in shapes:
        x = torch.randn(shape, generator=gen)
        try:
            with torch.no_grad():
                expected = model(x)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="raises in eager"):
                compiled(x)
            continue
        with torch.no_grad():
            verdict = judge(compiled(x), expected, model64(x.double()))
        assert verdict.passed, f"{shape}: {verdict.message}"
        ran.append(tuple(shape))
    return ran


def test_conv_transpose3d_runs_at_the_declared_min():
    """The issue's case: refused at (1, 3, 1, 1, 1) by ``(s16*s82*s96) != 1``."""
    torch.manual_seed(0)
    model = torch.nn.ConvTranspose3d(3, 3, 1).eval()
    spec = Input(min_shape=(1, 3, 1, 1, 1), opt_shape=(2, 3, 4, 4, 4),
                 max_shape=(8, 3, 32, 32, 32))
    compiled = torch_trt_ref.compile(model, [spec], min_block_size=1)
    shapes = [(1, 3, 1, 1, 1), (2, 3, 4, 4, 4), (8, 3, 32, 32, 32), (3, 3, 5, 6, 7),
              (8, 3, 1, 1, 1), (1, 3, 32, 1, 1), (1, 3, 1, 1, 32), (2, 3, 1, 2, 1)]
    assert sweep(model, compiled, shapes) == shapes
    assert compiled.compile_report.untraced_sizes == [
        {"input 0 dim 2": [1, 1], "input 0 dim 3": [1, 1], "input 0 dim 4": [1, 1]}]


CONVS = [("Conv1d", {"kernel_size": 1}), ("Conv2d", {"kernel_size": 1}),
         ("Conv3d", {"kernel_size": 1}), ("Conv3d", {"kernel_size": 2, "stride": 2}),
         ("ConvTranspose1d", {"kernel_size": 1}), ("ConvTranspose2d", {"kernel_size": 1}),
         ("ConvTranspose3d", {"kernel_size": 1}),
         ("ConvTranspose3d", {"kernel_size": 3, "padding": 1})]


@pytest.mark.parametrize("name,kwargs", CONVS, ids=[f"{n}-{k}" for n, k in CONVS])
def test_dynamic_conv_matches_eager_at_every_corner_down_to_1(name, kwargs):
    torch.manual_seed(0)
    model = getattr(torch.nn, name)(3, 4, **kwargs).eval()
    nd = int(name[-2])
    spec = Input(min_shape=(1, 3) + (1,) * nd, opt_shape=(2, 3) + (4,) * nd,
                 max_shape=(4, 3) + (7,) * nd)
    compiled = torch_trt_ref.compile(model, [spec], min_block_size=1)
    shapes = [(b, 3) + spatial for b in (1, 4)
              for spatial in itertools.product((1, 2, 7), repeat=nd)] + [(2, 3) + (4,) * nd]
    ran = sweep(model, compiled, shapes)
    if "stride" in kwargs:  # a kernel of 2 needs every spatial size >= 2, in eager too
        assert ran == [s for s in shapes if min(s[2:]) >= 2]
    else:
        assert ran == shapes


# Torch-TensorRT's tests/py/dynamo/conversion/test_group_norm_aten.py,
# test_groupnorm_with_dynamic_shape: (N, C, HxW, group, min, opt, max), N and HxW passed as
# ints over a dynamic range. Eager runs only where x.numel() == N*C*HxW: at max.
TORCH_TENSORRT_GROUP_NORM = [
    (5, 4, 4, 1, (2, 4, 2), (3, 4, 2), (5, 4, 4)),
    (5, 4, 2 * 2, 4, (2, 4, 2, 2), (3, 4, 2, 2), (5, 4, 2, 2)),
    (5, 9, 6 * 3, 3, (3, 9, 3, 3), (4, 9, 3, 3), (5, 9, 6, 3)),
    (8, 9, 6 * 3 * 2, 3, (3, 9, 2, 3, 2), (5, 9, 3, 3, 2), (8, 9, 6, 3, 2)),
]


class NativeGroupNorm(torch.nn.Module):
    def __init__(self, N=5, C=4, HxW=4, group=1):
        super().__init__()
        self.sizes = (N, C, HxW, group)

    def forward(self, x, weight=None, bias=None):
        N, C, HxW, group = self.sizes
        return torch.ops.aten.native_group_norm.default(x, weight, bias, N, C, HxW, group,
                                                        1e-05)[0]


@pytest.mark.parametrize("case", TORCH_TENSORRT_GROUP_NORM, ids=lambda c: f"{len(c[4])}d")
def test_torch_tensorrt_dynamic_group_norm_runs_where_eager_runs(case):
    """Failed in capture (``shape '[5, 1, 4, 4]' is invalid for input of size 4*s53*s77``):
    eager raises at the declared opt, so the model is traced at max."""
    N, C, HxW, group, lo, opt, hi = case
    model = NativeGroupNorm(N, C, HxW, group).eval()
    specs = [Input(min_shape=lo, opt_shape=opt, max_shape=hi), Input(shape=(C,)),
             Input(shape=(C,))]
    with pytest.warns(UserWarning, match="raises in eager at declared sizes"):
        compiled = torch_trt_ref.compile(model, specs, min_block_size=1)
    weight, bias = torch.randn(C), torch.randn(C)
    shapes = list(itertools.product(*[range(a, b + 1) for a, b in zip(lo, hi)]))
    ran = []
    for shape in shapes:
        x = torch.randn(shape)
        try:
            expected = model(x, weight, bias)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="raises in eager"):
                compiled(x, weight, bias)
            continue
        verdict = judge(compiled(x, weight, bias), expected,
                        model(x.double(), weight.double(), bias.double()))
        assert verdict.passed, f"{shape}: {verdict.message}"
        ran.append(shape)
    assert ran == [hi]


def test_a_model_eager_cannot_run_at_opt_max_or_min_is_a_clear_error():
    model = NativeGroupNorm(5, 4, 4, 1).eval()
    specs = [Input(min_shape=(2, 4, 2), opt_shape=(3, 4, 2), max_shape=(4, 4, 4)),
             Input(shape=(4,)), Input(shape=(4,))]
    with pytest.raises(ValueError, match=r"raises in eager at the declared opt, max and min "
                                         r"shapes \(input 0: min \(2, 4, 2\), opt \(3, 4, 2\)"):
        torch_trt_ref.compile(model, specs, min_block_size=1)


class BranchesOnArea(torch.nn.Module):
    """Takes another path where H * W == 1: a condition over two sizes."""

    def forward(self, x):
        return x * 2 if x.shape[1] * x.shape[2] == 1 else x + 1


def test_a_size_where_eager_takes_another_path_is_compiled_on_its_own(tmp_path):
    spec = Input(min_shape=(1, 1, 1), opt_shape=(2, 3, 3), max_shape=(3, 4, 4))
    compiled = torch_trt_ref.compile(BranchesOnArea().eval(), [spec], min_block_size=1)
    report = compiled.compile_report
    assert [b["sizes"] for b in report.size_branches] == [
        {}, {"input 0 dim 1": [1, 1], "input 0 dim 2": [1, 1]}]
    assert report.size_branches[0]["where"]  # the traced graph's condition
    shapes = list(itertools.product(range(1, 4), range(1, 5), range(1, 5)))
    assert sweep(BranchesOnArea(), compiled, shapes) == shapes
    torch_trt_ref.save(compiled, tmp_path / "area.ttrt")
    loaded = torch_trt_ref.load(tmp_path / "area.ttrt")
    for shape in ((2, 1, 1), (2, 1, 3)):
        x = torch.randn(shape)
        assert torch.equal(loaded(x), BranchesOnArea()(x))


def test_sizes_past_the_probe_limit_raise_naming_the_condition(monkeypatch):
    """More failing sizes than size cover runs in eager: those not run are refused, with
    the condition named (here 62 sizes, 4 run)."""
    monkeypatch.setattr(size_cover, "MAX_PROBED", 4)
    model = NativeGroupNorm(5, 4, 4, 1).eval()
    spec = Input(min_shape=(1, 4, 1), opt_shape=(5, 4, 4), max_shape=(8, 4, 8))
    with pytest.warns(UserWarning, match="fails at more declared sizes than are run in eager"):
        compiled = torch_trt_ref.compile(model, [spec], min_block_size=1)
    x = torch.randn(5, 4, 4)
    assert judge(compiled(x), model(x), model(x.double())).passed
    with pytest.raises(RuntimeError, match=r"break the condition \(4\*s\w+\*s\w+\) == 80"):
        compiled(torch.randn(8, 4, 8))


def test_the_sizes_where_a_condition_fails_are_listed():
    spec = Input(min_shape=(1, 3, 1, 1, 1), opt_shape=(2, 3, 4, 4, 4),
                 max_shape=(8, 3, 32, 32, 32))
    ep = capture(torch.nn.ConvTranspose3d(3, 3, 1).eval(), [spec])
    (condition,) = size_conditions(ep, [spec])
    assert condition.dims == [(0, 2), (0, 3), (0, 4)]
    assert condition.failing == ((1, 1, 1),)


def test_a_condition_with_max_and_floor_division_is_listed_as_its_code_says():
    """Listed on numpy arrays (sympy.lambdify); the compiled module evaluates its Python
    code (``holds``): both must agree at every point of the grid."""
    spec = Input(min_shape=(1, 3, 1, 1, 1), opt_shape=(2, 3, 4, 4, 4),
                 max_shape=(2, 3, 9, 9, 9))
    ep = capture(torch.nn.Conv3d(3, 3, 2, stride=2).eval(), [spec])
    (condition,) = [c for c in size_conditions(ep, [spec]) if "max" in c.code]
    grid = itertools.product(range(1, 10), repeat=3)
    assert condition.failing == tuple(
        p for p in grid if not holds(condition.code, dict(zip(condition.sizes, p))))
    assert condition.failing[:2] == ((1, 1, 1), (1, 1, 2))
