"""A converter whose validator accepts a node must build it (issue 21): constants where a
tensor is expected, empty inputs, and variants TensorRT lacks are either converted or
rejected with a reason, never claimed and then failed at conversion (a silent fallback)."""

import pytest
import torch

import torch_trt_ref
from torch_trt_ref.conversion.registry import CONVERTERS
from torch_trt_ref.settings import CompilationSettings

aten = torch.ops.aten


def _module(fn):
    return type("M", (torch.nn.Module,), {"forward": lambda self, *xs: fn(*xs)})().eval()


def _compiled_fully(fn, *xs):
    model = _module(fn)
    compiled = torch_trt_ref.compile(model, list(xs), min_block_size=1)
    assert compiled.compile_report.fallbacks == {}
    assert compiled.compile_report.counts.get("torch", 0) == 0, compiled.compile_report.counts
    for got, want in zip(torch.utils._pytree.tree_leaves(compiled(*xs)),
                         torch.utils._pytree.tree_leaves(model(*xs))):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("shape,index", [((5, 0), [0, 2, 0]), ((5, 0, 3), [1, 1]),
                                         ((5, 2), []), ((5, 2), [4, 0, 4])])
def test_accumulating_index_put_with_zero_sizes_converts(shape, index):
    """index_put(accumulate=True) where a kept dim or the index is empty (a -1 reshape was
    ambiguous there: "Could not get tensor shape", then a fallback)."""
    x, i = torch.randn(shape), torch.tensor(index, dtype=torch.int64)
    v = torch.randn(len(index), *shape[1:])
    _compiled_fully(lambda x, i, v: aten.index_put(x, (i,), v, True), x, i, v)


def test_eval_dropout_of_a_constant_converts():
    constant = torch.randn(1, 3)
    _compiled_fully(lambda: aten.native_dropout(constant, 0.3, False))


@pytest.mark.parametrize("affine", [False, True])
def test_group_norm_of_an_empty_batch_converts(affine):
    x, w, b = torch.randn(0, 2), torch.randn(2), torch.randn(2)
    if affine:
        _compiled_fully(lambda x, w, b: torch.nn.functional.group_norm(x, 1, w, b), x, w, b)
    else:
        _compiled_fully(lambda x: aten.native_group_norm(x, None, None, 0, 2, 1, 1, 1e-5), x)


@pytest.mark.parametrize("shapes", [((3, 4, 0), (5, 0), (5,)), ((3, 4, 0), (5, 0)),
                                    ((0, 3), (4, 3), (4,))],
                         ids=["3d-no-features-bias", "3d-no-features", "no-rows"])
def test_linear_with_an_empty_dim_lowers_and_converts(shapes):
    """The linear decomposition reshaped with -1, ambiguous for 0 features: it raised."""
    _compiled_fully(torch.nn.functional.linear, *[torch.randn(s) for s in shapes])


def _grid_node(target, rank: int, interpolation: int):
    graph = torch.fx.Graph()
    x, grid = graph.placeholder("x"), graph.placeholder("grid")
    x.meta["val"] = torch.empty((1, 2) + (3,) * (rank - 2))
    grid.meta["val"] = torch.empty((1,) + (2,) * (rank - 2) + (rank - 2,))
    return graph.call_function(target, (x, grid, interpolation, 0, False))


@pytest.mark.parametrize("target", [aten.grid_sampler_3d.default, aten.grid_sampler.default])
def test_bicubic_grid_sample_of_rank_5_is_rejected_with_a_reason(target):
    """TensorRT's CUBIC grid sample (and torch's) takes 4-D inputs only; the validator
    accepted rank 5 and the reference layer raised NotImplementedError."""
    settings = CompilationSettings()
    (support, *_) = CONVERTERS.candidates(target)
    reason = support.validate(_grid_node(target, 5, 2), settings)
    assert reason and "bicubic" in reason
    assert support.validate(_grid_node(target, 5, 0), settings) is None  # bilinear: kept


class NormOfWeight(torch.nn.Module):
    """DeBERTa-v2's pattern: a layer norm over a weight (a constant the lowering does not
    fold: native_layer_norm has three outputs)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(16, 8))

    def forward(self, x):
        return torch.relu(x @ torch.nn.functional.layer_norm(self.w, (8,)).t()) * 2 + 1


def test_a_layer_norm_over_a_weight_converts_and_refits():
    model, x = NormOfWeight().eval(), torch.randn(4, 8)
    compiled = torch_trt_ref.compile(model, [x], min_block_size=1)
    assert compiled.compile_report.counts == {"tensorrt": 1}
    torch.testing.assert_close(compiled(x), model(x))
    other = NormOfWeight().eval()
    torch_trt_ref.refit(compiled, other)  # the constant layer is recorded for refit
    torch.testing.assert_close(compiled(x), other(x))
