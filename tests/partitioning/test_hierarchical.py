"""Hierarchical partitioning: each node goes to the highest-priority backend accepting it;
inductor segments really run through torch.compile(backend="inductor")."""

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

import torch_trt_ref as ttr
from torch_trt_ref.capture import capture
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.partitioning import partition, stitch, wrap_backend_segment
from torch_trt_ref.partitioning.hierarchical import BackendSegment

from .support import SeedOrder, lgamma_inputs, make_registry, plan

REGISTRY = make_registry()
T, I, P = "tensorrt", "inductor", "torch"
THREE = dict(partitioner="hierarchical", min_block_size=1,
             backend_priority=("tensorrt", "inductor", "torch"))


@pytest.fixture(scope="module")
def seed_graph():
    return lower_program(capture(SeedOrder(), lgamma_inputs()), ttr.CompilationSettings())


def _plan(gm, **kw):
    return plan(partition(gm, ttr.CompilationSettings(**{**THREE, **kw}), REGISTRY))


def test_unsupported_ops_go_to_the_next_backend(seed_graph):
    assert _plan(seed_graph, backend_support_map={"inductor": {"aten::lgamma"}}) == [
        (T, ["add", "div", "mul"]), (I, ["lgamma", "lgamma", "lgamma"]), (T, ["cat"])]
    # without an inductor entry for lgamma it falls through to torch
    assert _plan(seed_graph, backend_support_map={"inductor": {"aten::sin"}}) == [
        (T, ["add", "div", "mul"]), (P, ["lgamma", "lgamma", "lgamma"]), (T, ["cat"])]


def test_priority_order_decides(seed_graph):
    support = {"inductor": {"aten.add.Tensor", "aten::lgamma"}}
    assert _plan(seed_graph, backend_priority=("inductor", "tensorrt"),
                 backend_support_map=support) == [
        (I, ["add", "lgamma", "lgamma"]), (T, ["div", "mul"]), (I, ["lgamma"]), (T, ["cat"])]


def test_tensorrt_entry_restricts_and_torch_executed_ops_win(seed_graph):
    support = {"tensorrt": {"aten::cat", "aten::add"}, "inductor": {"aten::lgamma", "aten::mul"}}
    result = _plan(seed_graph, backend_support_map=support, torch_executed_ops={"aten::mul"})
    assert result == [(T, ["add"]), (I, ["lgamma", "lgamma"]), (P, ["div", "mul"]),
                      (I, ["lgamma"]), (T, ["cat"])]


def test_segments_are_named_by_backend(seed_graph):
    settings = ttr.CompilationSettings(**THREE, backend_support_map={"inductor": {"aten::lgamma"}})
    stitched = stitch(seed_graph, partition(seed_graph, settings, REGISTRY))
    modules = [n.target for n in stitched.graph.nodes if n.op == "call_module"]
    assert modules == ["_run_on_tensorrt_0", "_run_on_inductor_1", "_run_on_tensorrt_2"]


def test_inductor_segment_is_compiled_by_inductor():
    x, y = lgamma_inputs()
    before = sum(counters["inductor"].values())
    compiled = ttr.compile(SeedOrder(), (x, y), registry=REGISTRY, **THREE,
                           backend_support_map={"inductor": {"aten::lgamma"}})
    segment = compiled._run_on_inductor_1
    assert isinstance(segment, BackendSegment) and segment.compiled is None
    torch.testing.assert_close(compiled(x, y), SeedOrder()(x, y))
    assert segment.compiled is True, segment.error
    assert sum(counters["inductor"].values()) > before  # inductor's FX graph cache was asked
    assert compiled.compile_report.counts == {"tensorrt": 2, "inductor": 1}


def test_unknown_backend_is_a_clear_error(seed_graph):
    with pytest.raises(ValueError, match="not a torch.compile backend"):
        wrap_backend_segment("_run_on_nope_1", seed_graph, "nope")


def test_backend_that_cannot_compile_falls_back_to_eager_with_a_warning():
    @torch._dynamo.register_backend(name="ttr_test_broken")
    def broken(gm, example_inputs):
        raise RuntimeError("no compiler here")

    module = torch.fx.symbolic_trace(lambda x: torch.lgamma(x) + 1)
    segment = wrap_backend_segment("_run_on_ttr_test_broken_0", module, "ttr_test_broken")
    x = torch.rand(3) + 0.5
    with pytest.warns(UserWarning, match="could not compile this segment"):
        out = segment(x)
    torch.testing.assert_close(out, torch.lgamma(x) + 1)
    assert segment.compiled is False and "no compiler here" in segment.error
