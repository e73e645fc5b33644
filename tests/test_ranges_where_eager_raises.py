"""Declared ranges that hold sizes where the model raises in eager (a reflection pad wider
than the input, a pooling window larger than it, a view of an odd size) or leave many sizes
outside the trace (Note [Sizes the trace does not cover] in size_cover.py): the compiled
module matches eager under the float64 rule at every size where eager runs and raises
where eager raises, and the compile warns naming those sizes."""

import itertools

import pytest
import torch

import torch_trt_ref
from torch_trt_ref import Input
from torch_trt_ref.accuracy import judge


class Op(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def _up(x):
    return torch.ops.aten.upsample_bilinear2d.vec(x, None, True, [0.5, 1.5])


CASES = {  # name: (forward, min, opt, max, the sizes tried: each dim's sizes, None = all)
    "reflection_pad1d": (lambda x: torch.ops.aten.reflection_pad1d(x, [1, 1]),
                         (1, 1, 1), (2, 2, 2), (3, 3, 3), None),
    "upsample_bilinear2d": (_up, (1, 1, 1, 1), (5, 5, 5, 5), (9, 9, 9, 9),
                            [(1, 2), (2,), range(1, 10), range(1, 10)]),
    "view_odd_sizes": (lambda x: x.view(2, 2, -1), (1, 2, 5), (10, 2, 5), (10, 2, 5), None),
    "reflection_pad2d": (lambda x: torch.nn.functional.pad(x, [2, 2, 1, 1], mode="reflect"),
                         (1, 1, 1, 1), (1, 2, 4, 4), (2, 2, 5, 5),
                         [(1,), (2,), range(1, 6), range(1, 6)]),
    "circular_pad1d": (lambda x: torch.nn.functional.pad(x, [2, 2], mode="circular"),
                       (1, 1, 1), (1, 2, 4), (2, 2, 5), None),
    "unfold_past_the_size": (lambda x: x.unfold(1, 3, 1), (1, 1), (2, 5), (2, 6), None),
    "max_pool2d_window_past_H": (lambda x: torch.nn.functional.max_pool2d(x, 3),
                                 (1, 1, 1, 4), (1, 2, 6, 6), (2, 2, 8, 8),
                                 [(1,), (2,), range(1, 9), (4, 6)]),
    "avg_pool3d_window_past_T": (lambda x: torch.nn.functional.avg_pool3d(x, (2, 2, 2)),
                                 (1, 2, 1, 4, 4), (1, 2, 3, 4, 4), (2, 2, 4, 4, 4), None),
}


def sizes(lo, hi, tried):
    dims = tried or [range(a, b + 1) for a, b in zip(lo, hi)]
    return list(itertools.product(*dims))


@pytest.mark.parametrize("name", list(CASES))
def test_compiles_matches_eager_where_it_runs_and_raises_where_it_raises(name):
    fn, lo, opt, hi, tried = CASES[name]
    model = Op(fn).eval()
    with pytest.warns(UserWarning, match="raises in eager at declared sizes"):
        compiled = torch_trt_ref.compile(model, [Input(min_shape=lo, opt_shape=opt,
                                                       max_shape=hi)], min_block_size=1)
    assert compiled.compile_report.raising_sizes
    ran = raised = 0
    gen = torch.Generator().manual_seed(0)
    for shape in sizes(lo, hi, tried):
        x = torch.randn(shape, generator=gen)
        try:
            expected = model(x)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                compiled(x)
            raised += 1
            continue
        verdict = judge(compiled(x), expected, model(x.double()))
        assert verdict.passed, f"{shape}: {verdict.message}"
        ran += 1
    assert ran and raised


class BranchesAtTwelve(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=0) * 2 if x.shape[0] > 12 else torch.tanh(x)


def test_more_untraced_sizes_than_are_checked_compile_per_run_of_sizes():
    """Traced at 16, the graph covers 13..16; the 12 sizes 1..12 are one run, compiled on
    its own (was a DynamicShapeError: more than 2 untraced sizes)."""
    spec = Input(min_shape=(1, 3), opt_shape=(16, 3), max_shape=(16, 3))
    compiled = torch_trt_ref.compile(BranchesAtTwelve().eval(), [spec], min_block_size=1)
    branches = [b["sizes"]["input 0 dim 0"] for b in compiled.compile_report.size_branches]
    assert branches == [[13, 16], [1, 12]]
    for batch in range(1, 17):
        x = torch.randn(batch, 3)
        verdict = judge(compiled(x), BranchesAtTwelve()(x), BranchesAtTwelve()(x.double()))
        assert verdict.passed, f"batch {batch}: {verdict.message}"


def test_a_module_that_raises_at_some_sizes_saves_and_loads(tmp_path):
    fn, lo, opt, hi, _ = CASES["reflection_pad1d"]
    with pytest.warns(UserWarning):
        compiled = torch_trt_ref.compile(Op(fn).eval(), [Input(min_shape=lo, opt_shape=opt,
                                                               max_shape=hi)], min_block_size=1)
    torch_trt_ref.save(compiled, tmp_path / "pad.ttrt")
    loaded = torch_trt_ref.load(tmp_path / "pad.ttrt")
    x = torch.randn(2, 2, 3)
    assert torch.equal(loaded(x), fn(x))
    with pytest.raises(RuntimeError, match="raises in eager"):
        loaded(torch.randn(2, 2, 1))
