"""The dry run (``compile(..., dryrun=True)``): what a compile would do, from lowering and
partitioning alone — segments, estimated engines and their weights, and what
min_block_size sent back to PyTorch — as data and as text."""

from __future__ import annotations

from collections import Counter
from typing import Any

from torch.fx import GraphModule

from .partitioning import TENSORRT, PartitionResult
from .partitioning.capability import is_compute_node
from .partitioning.stitch import segment_name
from .settings import CompilationSettings, op_name

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


def render_dry_run(report) -> str:
    """The dry-run report as text (``CompileReport.render`` when ``report.dryrun``)."""
    plan, sup, counts = report.plan, report.support, report.counts
    mib = 2**20
    lines = [
        "dry run: lowered and partitioned only; nothing was converted or built, and the "
        "returned module runs every segment in PyTorch",
        f"segments: {counts.get('tensorrt', 0)} TensorRT, {counts.get('torch', 0)} PyTorch"
        + "".join(f", {n} {t}" for t, n in counts.items() if t not in ("tensorrt", "torch")),
        f"supported ops: {sup.get('n_supported', 0)}/{sup.get('n_total', 0)} call_function "
        "nodes"]
    for op, n in sorted(sup.get("supported", {}).items()):
        lines.append(f"  supported {op} x{n}")
    for op, n in sorted(sup.get("unsupported", {}).items()):
        why = "; ".join(f"{r} (x{c})" for r, c in sup.get("reasons", {}).get(op, {}).items())
        lines.append(f"  unsupported {op} x{n}: {why}")
    moved = plan.get("moved_by_min_block_size", [])
    if moved:
        n_nodes = sum(len(m["nodes"]) for m in moved)
        lines.append(f"min_block_size={plan['min_block_size']} sent {len(moved)} planned "
                     f"run(s) of supported nodes ({n_nodes} nodes) back to PyTorch:")
        for m in moved:
            shown = ", ".join(m["nodes"][:6]) + (", ..." if len(m["nodes"]) > 6 else "")
            lines.append(f"  into {m['segment']}: {shown} -- {m['reason']}")
    lines.append("segments in execution order:")
    for s in plan.get("segments", []):
        ops = ", ".join(f"{op} x{n}" for op, n in list(s["ops"].items())[:4])
        more = ", ..." if len(s["ops"]) > 4 else ""
        weights = (f", weights {s['weight_bytes'] / mib:.2f} MiB" if s["target"] == TENSORRT
                   else "")
        lines.append(f"  {s['name']}: {s['compute_nodes']} compute nodes ({ops}{more}), "
                     f"{s['inputs']} in / {s['outputs']} out{weights}")
    lines.append(f"estimated engines: {plan.get('estimated_engines', 0)}, "
                 f"{plan.get('estimated_weight_bytes', 0) / mib:.2f} MiB of weights in them")
    if report.lowering:
        lines.append(f"lowering: {report.lowering}")
    lines.append("time per phase: " + ", ".join(
        f"{p} {report.phases.get(p, 0.0):.2f}s" for p in ("capture", "lowering", "partition")))
    for name, nodes in report.upcasts.items():
        lines.extend(f"  {name}: {line}" for line in nodes)
    return "\n".join(lines)
