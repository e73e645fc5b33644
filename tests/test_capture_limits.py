"""What torch.export can and cannot capture, said as such (issue 21 item 8): ``resize_`` of a
model input (Note [Resizing an input]), a Python read of tensor data such as ``sym_not`` on a
tensor, and a group norm whose sizes were passed as constants over a dynamic range (Note
[Conditions over several sizes]). Compiled results are judged against eager."""

import itertools

import pytest
import torch

import torch_trt_ref
from torch_trt_ref import Input
from torch_trt_ref.accuracy import judge


class Resize(torch.nn.Module):
    def __init__(self, size):
        super().__init__()
        self.size = size

    def forward(self, x):
        return torch.ops.aten.resize_.default(x, self.size)


@pytest.mark.parametrize("shape,size", [((5,), (3,)), ((5,), (10,)), ((4, 4), (3, 5)),
                                        ((4, 4), (3,)), ((5,), (5,))])
def test_resize_of_an_input_to_no_higher_rank_compiles_and_matches_eager(shape, size):
    x = torch.randn(shape)
    with pytest.warns(UserWarning, match="resizes its input"):
        compiled = torch_trt_ref.compile(Resize(size).eval(), [x.clone()], min_block_size=1)
    got, want = compiled(x.clone()), Resize(size)(x.clone())
    kept = min(x.numel(), want.numel())  # past the input's elements: uninitialized memory
    assert got.shape == want.shape
    assert torch.equal(got.flatten()[:kept], want.flatten()[:kept])


def test_resize_of_an_input_to_a_higher_rank_names_the_op_and_the_input():
    with pytest.raises(ValueError, match=r"resizes its input 'x' in place from \[5\] to "
                                         r"\[2, 2\] \(aten.resize_\)"):
        torch_trt_ref.compile(Resize((2, 2)).eval(), [torch.randn(5)], min_block_size=1)


class GrowsAView(torch.nn.Module):
    def forward(self, x):
        y = x[0]
        y.resize_(8)
        return y


def test_growing_a_view_names_the_op_and_what_is_accepted():
    with pytest.raises(ValueError, match="aten.resize_ grows a view"):
        torch_trt_ref.compile(GrowsAView().eval(), [torch.randn(2, 3)], min_block_size=1)


class SymNot(torch.nn.Module):
    def forward(self, x):
        return torch.sym_not(x)


@pytest.mark.parametrize("value", [torch.tensor(True), torch.tensor([[False]])])
def test_sym_not_of_a_tensor_names_the_model_line(value):
    with pytest.raises(ValueError) as err:
        torch_trt_ref.compile(SymNot().eval(), [value], min_block_size=1)
    message = str(err.value)
    assert "reads a tensor's value in Python" in message
    assert "test_capture_limits.py" in message and "torch.sym_not(x)" in message
    assert "torch.logical_not" in message


class GroupNormConstants(torch.nn.Module):
    """N and HxW passed as the ints of one example (as OpInfo-style samples do)."""

    def forward(self, x):
        return torch.ops.aten.native_group_norm(x, None, None, 5, 4, 4, 1, 1e-5)[0]


def test_group_norm_with_constant_sizes_over_a_dynamic_range_raises_where_eager_does():
    """The graph holds where x.numel() == 80 (``4*s0*s1 == 80``): eager runs at (5, 4, 4)
    and (4, 4, 5) and raises at the 62 other declared sizes; so does the compiled module
    (it refused them all, as sizes it was not traced for, before issue 36)."""
    spec = Input(min_shape=(1, 4, 1), opt_shape=(5, 4, 4), max_shape=(8, 4, 8))
    with pytest.warns(UserWarning, match="raises in eager at declared sizes"):
        compiled = torch_trt_ref.compile(GroupNormConstants().eval(), [spec], min_block_size=1)
    ran = []
    for n, length in itertools.product(range(1, 9), range(1, 9)):
        x = torch.randn(n, 4, length)
        try:
            expected = GroupNormConstants()(x)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="raises in eager"):
                compiled(x)
            continue
        verdict = judge(compiled(x), expected, GroupNormConstants()(x.double()))
        assert verdict.passed, f"{x.shape}: {verdict.message}"
        ran.append(tuple(x.shape))
    assert ran == [(4, 4, 5), (5, 4, 4)]


class GroupNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = torch.nn.GroupNorm(2, 6)

    def forward(self, x):
        return self.gn(x)


@pytest.mark.parametrize("lo", [1, 2])
def test_group_norm_over_dynamic_batch_and_length_matches_eager(lo):
    torch.manual_seed(0)
    model = GroupNorm().eval()
    spec = Input(min_shape=(lo, 6, lo), opt_shape=(6, 6, 5), max_shape=(10, 6, 9))
    compiled = torch_trt_ref.compile(model, [spec], min_block_size=1)
    assert compiled.compile_report.counts == {"tensorrt": 1}
    for shape in ((lo, 6, lo), (6, 6, 5), (10, 6, 9), (3, 6, 7)):
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
