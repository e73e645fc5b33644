"""Conversion throughput: the interpreter alone (no builder) on a long elementwise chain
and on every TensorRT segment of a zoo model; nodes per second go to extra_info.

``segments_of`` and ``convert_segments`` are the hooks: any model (or a converter author's
graph) can be measured the same way."""

from __future__ import annotations

import torch

from torch_trt_ref.capture import as_inputs, capture
from torch_trt_ref.compiler import lower_program
from torch_trt_ref.conversion.interpreter import Interpreter
from torch_trt_ref.conversion.shapes import spec_from_fake
from torch_trt_ref.partitioning import TENSORRT, partition, stitch
from torch_trt_ref.partitioning.stitch import segment_name
from torch_trt_ref.ranges import symbol_ranges
from torch_trt_ref.settings import CompilationSettings
from zoo.registry import get

from .conftest import pedantic


def segments_of(model, args, kwargs=None, settings=None):
    """The TensorRT segments (GraphModules with input specs) the compiler would convert."""
    settings = settings or CompilationSettings()
    kwargs = kwargs or {}
    gm = lower_program(capture(model, list(args), dict(kwargs)), settings)
    result = partition(gm, settings)
    stitched = stitch(gm, result)
    ranges = symbol_ranges(gm, as_inputs(list(args)) + as_inputs(list(kwargs.values())))
    out = []
    for i, seg in enumerate(result.segments):
        if seg.target == TENSORRT:
            sub = getattr(stitched, segment_name(i, seg))
            specs = [spec_from_fake(n.name, n.meta["val"], ranges)
                     for n in sub.graph.nodes if n.op == "placeholder"]
            out.append((sub, specs))
    return out, settings


def convert_segments(segments, settings) -> int:
    """Convert every segment to a TensorRT network; returns the number of nodes converted."""
    nodes = 0
    for sub, specs in segments:
        Interpreter(sub, specs, settings).run()
        nodes += sum(1 for n in sub.graph.nodes if n.op == "call_function")
    return nodes


class Chain(torch.nn.Module):
    def __init__(self, length: int = 300):
        super().__init__()
        self.length = length

    def forward(self, x, y):
        for _ in range(self.length):
            x = torch.relu(x + y)
        return x


def _bench(benchmark, segments, settings):
    assert segments, "no TensorRT segment to convert"
    nodes = convert_segments(segments, settings)
    pedantic(benchmark, lambda: convert_segments(segments, settings), rounds=5, warmup_rounds=1)
    benchmark.extra_info.update(normalize_by="python", nodes=nodes,
                                nodes_per_second=nodes / benchmark.stats.stats.median)


def test_conversion_chain(benchmark):
    x, y = torch.randn(8, 8), torch.randn(8, 8)
    segments, settings = segments_of(Chain(), (x, y))
    _bench(benchmark, segments, settings)


def test_conversion_bert_2layer(benchmark):
    entry = get("bert_2layer")
    args, kwargs = entry.inputs()
    segments, settings = segments_of(entry.factory(), args, kwargs)
    _bench(benchmark, segments, settings)
