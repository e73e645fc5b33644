"""The dry run's plan (``compile(..., dryrun=True)``): what a compile would do, from
lowering and partitioning alone — segments, estimated engines and their weights, and what
min_block_size sent back to PyTorch — as data (``report.render_dry_run`` shows it)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from torch.fx import GraphModule

from ..settings import CompilationSettings, op_name
from .capability import is_compute_node
from .result import TENSORRT, PartitionResult
from .stitch import segment_name

_MIN_BLOCK = "< min_block_size="


def plan_summary(gm: GraphModule, result: PartitionResult,
                 settings: CompilationSettings) -> dict[str, Any]:
    """The plan of a partitioned graph as data: one entry per segment (target, compute
    nodes, ops, boundary sizes, weight bytes) and the runs of nodes min_block_size moved
    from an accelerator to PyTorch, each with its reason. ``gm`` is the lowered graph the
    result partitions (weights are counted in its dtypes, i.e. after precision lowering)."""
    segments, moved = [], []
    for i, seg in enumerate(result.segments):
        name = segment_name(i, seg)
        compute = [n for n in seg.nodes if is_compute_node(n)]
        segments.append({
            "name": name, "target": seg.target, "compute_nodes": len(compute),
            "ops": dict(Counter(op_name(n.target) for n in compute).most_common()),
            "inputs": len(seg.inputs), "outputs": len(seg.outputs),
            "weight_bytes": seg.weight_bytes})
        run: list[str] = []
        reason = None
        for node in seg.nodes + [None]:  # consecutive nodes with one min_block_size reason
            why = result.rejected.get(node.name, "") if node is not None else ""
            if run and why != reason:
                moved.append({"segment": name, "nodes": run, "reason": reason})
                run = []
            if _MIN_BLOCK in why:
                run.append(node.name)
                reason = why
    engines = [s for s in segments if s["target"] == TENSORRT]
    return {"segments": segments, "min_block_size": settings.min_block_size,
            "moved_by_min_block_size": moved, "estimated_engines": len(engines),
            "estimated_weight_bytes": sum(s["weight_bytes"] for s in engines)}
