"""Seed 000's lgamma graph: dependency-aware segmentation gives 3 segments where the naive
linear traversal gives 7; every strategy's compiled module equals eager."""

import pytest
import torch

import torch_trt_ref as ttr
from torch_trt_ref.capture import capture
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.partitioning import partition

from .support import STRATEGY_NAMES, CatExpression, SeedOrder, lgamma_inputs, make_registry, plan

TRT, PT = "tensorrt", "torch"
REGISTRY = make_registry()
SETTINGS = ttr.CompilationSettings(min_block_size=1)


@pytest.fixture(scope="module")
def seed_graph():
    return lower_program(capture(SeedOrder(), lgamma_inputs()), SETTINGS)


@pytest.fixture(scope="module")
def expression_graph():
    return lower_program(capture(CatExpression(), lgamma_inputs()), SETTINGS)


def _plan(gm, strategy):
    return plan(partition(gm, SETTINGS, REGISTRY, strategy=strategy))


def test_exported_graph_has_the_seed_node_order(seed_graph):
    ops = [str(n.target) for n in seed_graph.graph.nodes if n.op == "call_function"]
    assert ops == ["aten.add.Tensor", "aten.lgamma.default", "aten.mul.Tensor",
                   "aten.lgamma.default", "aten.div.Tensor", "aten.lgamma.default",
                   "aten.cat.default"]


def test_dependency_aware_gives_the_seeds_three_segments(seed_graph):
    assert _plan(seed_graph, "dependency_aware") == [
        (TRT, ["add", "div", "mul"]), (PT, ["lgamma", "lgamma", "lgamma"]), (TRT, ["cat"])]


def test_linear_traversal_gives_seven_segments(seed_graph):
    assert _plan(seed_graph, "linear") == [
        (TRT, ["add"]), (PT, ["lgamma"]), (TRT, ["mul"]), (PT, ["lgamma"]), (TRT, ["div"]),
        (PT, ["lgamma"]), (TRT, ["cat"])]


def test_fast_gives_torch_tensorrt_2_13s_four_segments(seed_graph):
    # Torch-TensorRT's splitter starts with PyTorch because lgamma(x) only needs an input.
    assert _plan(seed_graph, "fast") == [
        (PT, ["lgamma", "lgamma"]), (TRT, ["add", "div", "mul"]), (PT, ["lgamma"]),
        (TRT, ["cat"])]


@pytest.mark.parametrize("strategy", ["global", "hierarchical"])
def test_global_and_hierarchical_find_three(seed_graph, strategy):
    assert _plan(seed_graph, strategy) == [
        (TRT, ["add", "div", "mul"]), (PT, ["lgamma", "lgamma", "lgamma"]), (TRT, ["cat"])]


def test_expression_form_is_exported_lgamma_first(expression_graph):
    """torch.cat([lgamma(x), lgamma(y), lgamma(x/y), x+y, x*y]) exports lgamma, lgamma, div,
    lgamma, add, mul, cat: the linear traversal already gives 4 there. Dependency-aware
    walks fast's phases (P: lgamma x2; T: div, add, mul; P: lgamma(div); T: cat): the open
    PyTorch segment takes the two lgammas, lgamma(div) finalizes the TensorRT one (div,
    add, mul) and joins it, cat finalizes it -- the seed's 3 segments in either form."""
    assert [len(_plan(expression_graph, s)) for s in
            ("linear", "fast", "dependency_aware", "global", "hierarchical")] == [4, 4, 3, 3, 4]
    assert _plan(expression_graph, "dependency_aware") == [
        (TRT, ["add", "div", "mul"]), (PT, ["lgamma", "lgamma", "lgamma"]), (TRT, ["cat"])]


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_compiled_module_equals_eager(strategy):
    x, y = lgamma_inputs()
    compiled = ttr.compile(SeedOrder(), (x, y), registry=REGISTRY, min_block_size=1,
                           partitioner=strategy)
    assert not compiled.compile_report.fallbacks
    expected = {"fast": 4, "dependency_aware": 3, "global": 3, "hierarchical": 3}[strategy]
    assert len(compiled.partition_result.segments) == expected
    torch.testing.assert_close(compiled(x, y), SeedOrder()(x, y))
