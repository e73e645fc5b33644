"""Adjacency ("fast") partitioning: one pass in topological order that grows a segment
while consecutive nodes share a target. O(N) in nodes."""

from __future__ import annotations

from torch.fx import GraphModule, Node

from .result import TENSORRT, TORCH, Segment


def fast_segments(gm: GraphModule, supported: set[Node]) -> list[Segment]:
    segments: list[Segment] = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        target = TENSORRT if node in supported else TORCH
        if segments and segments[-1].target == target:
            segments[-1].nodes.append(node)
        else:
            segments.append(Segment(target, [node]))
    return segments
