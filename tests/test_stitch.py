"""Stitching a partition with several segments keeps the module's behaviour."""

import operator

import torch

from torch_trt_ref import CompilationSettings
from torch_trt_ref.capture import capture
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.partitioning import TENSORRT, TORCH, PartitionResult, Segment, stitch
from torch_trt_ref.partitioning.driver import fill_boundaries


class Alternating(torch.nn.Module):
    def forward(self, x, y):
        a = torch.relu(x + y)  # tensorrt
        b = torch.lgamma(a)  # torch
        c = b + x  # tensorrt
        return c, {"b": b}


def _lowered():
    x, y = torch.rand(2, 3) + 0.5, torch.rand(2, 3) + 0.5
    gm = lower_program(capture(Alternating(), (x, y)), CompilationSettings())
    return gm, (x, y)


def test_three_segments_stitch_to_same_outputs_and_structure():
    gm, args = _lowered()
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert [n.target for n in calls][1] == torch.ops.aten.relu.default
    segments = [Segment(TENSORRT, calls[:2]), Segment(TORCH, calls[2:3]),
                Segment(TENSORRT, calls[3:])]
    fill_boundaries(gm, segments)
    assert [n.name for n in segments[1].inputs] == [calls[1].name]
    stitched = stitch(gm, PartitionResult("test", segments))
    modules = [n.target for n in stitched.graph.nodes if n.op == "call_module"]
    assert modules == ["_run_on_tensorrt_0", "_run_on_torch_1", "_run_on_tensorrt_2"]
    expected = Alternating()(*args)
    actual = stitched(*args)
    assert isinstance(actual, tuple) and isinstance(actual[1], dict)
    torch.testing.assert_close(actual[0], expected[0])
    torch.testing.assert_close(actual[1]["b"], expected[1]["b"])


def test_multi_output_segment_uses_getitem():
    gm, args = _lowered()
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    segments = [Segment(TORCH, calls)]
    fill_boundaries(gm, segments)
    stitched = stitch(gm, PartitionResult("test", segments))
    getitems = [n for n in stitched.graph.nodes if n.target is operator.getitem]
    assert len(getitems) == len(segments[0].outputs) == 2
    torch.testing.assert_close(stitched(*args)[0], Alternating()(*args)[0])
