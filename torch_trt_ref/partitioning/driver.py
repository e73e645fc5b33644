"""Runs a partition strategy and applies the rules every strategy shares: the capability
check, require_full_compilation, min_block_size, tensor-only TensorRT boundaries."""

from __future__ import annotations

from collections import Counter
from typing import Callable

import torch
from torch.fx import GraphModule, Node

from ..conversion.registry import CONVERTERS, ConverterRegistry
from ..settings import CompilationSettings, op_name
from .capability import check_node
from .result import TENSORRT, TORCH, PartitionResult, Segment

Strategy = Callable[[GraphModule, set, CompilationSettings], list[Segment]]
STRATEGIES: dict[str, Strategy] = {}


def register_strategy(name: str):
    def wrap(fn):
        STRATEGIES[name] = fn
        return fn
    return wrap


class UnsupportedOperatorError(RuntimeError):
    """require_full_compilation was set but some ops cannot run in TensorRT."""


def _full_compilation_error(rejected: dict[Node, str]) -> UnsupportedOperatorError:
    by_op: dict[str, Counter] = {}
    for node, reason in rejected.items():
        by_op.setdefault(op_name(node.target), Counter())[reason] += 1
    lines = []
    for op, reasons in sorted(by_op.items()):
        n = sum(reasons.values())
        lines.append(f"  {op}: {n} node{'s' if n > 1 else ''} -- " + "; ".join(reasons))
    return UnsupportedOperatorError(
        "require_full_compilation=True but these ops cannot run in TensorRT:\n"
        + "\n".join(lines)
        + "\nRegister a converter, add a decomposition, or set require_full_compilation=False "
          "to run them in PyTorch.")


def is_tensor_value(node: Node) -> bool:
    return isinstance(node.meta.get("val"), torch.Tensor)


def fill_boundaries(gm: GraphModule, segments: list[Segment]) -> None:
    """Compute each segment's inputs (values it reads from outside, weights excluded) and
    outputs (values used outside it), both in first-use order."""
    owner = {n: i for i, s in enumerate(segments) for n in s.nodes}
    for i, seg in enumerate(segments):
        inputs: dict[Node, None] = {}
        outputs: dict[Node, None] = {}
        for node in seg.nodes:
            for arg in node.all_input_nodes:
                if owner.get(arg) != i and arg.op != "get_attr":
                    inputs[arg] = None
            if any(owner.get(u) != i for u in node.users):
                outputs[node] = None
        seg.inputs, seg.outputs = list(inputs), list(outputs)


def merge_adjacent(segments: list[Segment]) -> list[Segment]:
    """Merge consecutive segments with the same target unless marked do_not_merge."""
    merged: list[Segment] = []
    for seg in segments:
        if merged and merged[-1].target == seg.target and not (
                seg.do_not_merge or merged[-1].do_not_merge):
            merged[-1].nodes.extend(seg.nodes)
        else:
            merged.append(Segment(seg.target, list(seg.nodes), seg.do_not_merge))
    return merged


def _boundary_violations(segments: list[Segment]) -> dict[Node, str]:
    """TensorRT segments may only exchange tensors with the rest of the graph."""
    bad: dict[Node, str] = {}
    for seg in segments:
        if seg.target != TENSORRT:
            continue
        for node in seg.outputs:
            if not is_tensor_value(node):
                bad[node] = "non-tensor output would leave a TensorRT segment"
        members = set(seg.nodes)
        for node in seg.nodes:
            if any(not is_tensor_value(a) and a not in members and a.op != "get_attr"
                   for a in node.all_input_nodes):
                bad[node] = "takes a non-tensor value from outside its TensorRT segment"
    return bad


def partition(gm: GraphModule, settings: CompilationSettings,
              registry: ConverterRegistry = CONVERTERS) -> PartitionResult:
    """Assign every call_function node of ``gm`` to a segment with ``settings.partitioner``."""
    from . import strategies  # noqa: F401  (registers the strategies)

    strategy = STRATEGIES[settings.partitioner]
    rejected: dict[Node, str] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function":
            reason = check_node(node, settings, registry)
            if reason is not None:
                rejected[node] = reason
    if settings.require_full_compilation and rejected:
        raise _full_compilation_error(rejected)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    while True:
        supported = {n for n in calls if n not in rejected}
        segments = strategy(gm, supported, settings)
        fully_supported = not rejected and settings.require_full_compilation
        if not fully_supported:
            for seg in segments:
                if seg.target == TENSORRT and seg.compute_size() < settings.min_block_size:
                    seg.target = TORCH
        segments = merge_adjacent(segments)
        fill_boundaries(gm, segments)
        bad = _boundary_violations(segments)
        if not bad:
            break
        if settings.require_full_compilation:
            raise _full_compilation_error(bad)
        rejected.update(bad)
    return PartitionResult(settings.partitioner, segments,
                           {n.name: r for n, r in rejected.items()})
