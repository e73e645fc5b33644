"""Dependency-aware segmentation: control flow gets its own do_not_merge segment; adjacent
segments of one target merge otherwise."""

import torch

import torch_trt_ref as ttr
from torch_trt_ref.capture import capture
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.partitioning import TENSORRT, TORCH, Segment, partition
from torch_trt_ref.partitioning.rules import merge_adjacent

from .support import make_registry, plan

REGISTRY = make_registry()
T, P = TENSORRT, TORCH


class WithCond(torch.nn.Module):
    def forward(self, x, y):
        a = torch.lgamma(x + y)
        b = torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t - 1, (a,))
        return b + torch.lgamma(x)


def _inputs():
    return torch.rand(2, 3) + 0.5, torch.rand(2, 3)


def test_control_flow_segment_is_never_merged():
    """The walk follows fast's phases: P lgamma(x) | T add, sum, gt | P lgamma(add), cond |
    T add. lgamma(x) opens the PyTorch segment; lgamma(add) finalizes the TensorRT one
    (add, sum, gt) and joins lgamma(x); the cond reads the open PyTorch segment, finalizing
    it, then stands alone; the last add cannot merge into it."""
    settings = ttr.CompilationSettings(min_block_size=1, partitioner="dependency_aware")
    gm = lower_program(capture(WithCond(), _inputs()), settings)
    result = partition(gm, settings, REGISTRY)
    assert plan(result) == [(T, ["add", "gt", "sum"]), (P, ["lgamma", "lgamma"]), (P, ["cond"]),
                            (T, ["add"])]
    assert [s.do_not_merge for s in result.segments] == [False, False, True, False]


def test_module_with_control_flow_equals_eager():
    x, y = _inputs()
    compiled = ttr.compile(WithCond(), (x, y), registry=REGISTRY, min_block_size=1,
                           partitioner="dependency_aware")
    assert not compiled.compile_report.fallbacks
    torch.testing.assert_close(compiled(x, y), WithCond()(x, y))
    torch.testing.assert_close(compiled(-x, y), WithCond()(-x, y))  # the other branch


def test_merge_adjacent_respects_do_not_merge():
    a, b, c, d = (torch.fx.Graph().placeholder(n) for n in "abcd")
    merged = merge_adjacent([Segment(T, [a]), Segment(T, [b]), Segment(P, [c], True),
                             Segment(P, [d])])
    assert [(s.target, [n.name for n in s.nodes]) for s in merged] == [
        (T, ["a", "b"]), (P, ["c"]), (P, ["d"])]
