"""The partition result (D4): segments (target, nodes, inputs, outputs) plus the reason
each rejected node was rejected. Every strategy returns this; ``stitch`` consumes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch.fx import Node

from .capability import is_compute_node

TENSORRT = "tensorrt"
TORCH = "torch"


@dataclass
class Segment:
    """Nodes (in a topological order) that run on one target: "tensorrt", "torch", or
    another backend of the hierarchical strategy. ``inputs``/``outputs`` are the values
    crossing its boundary; ``weight_bytes`` sums the weights (get_attr tensors) it uses."""

    target: str
    nodes: list[Node]
    do_not_merge: bool = False
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    weight_bytes: int = 0

    def compute_size(self) -> int:
        return sum(1 for n in self.nodes if is_compute_node(n))

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "nodes": [n.name for n in self.nodes],
                "inputs": [n.name for n in self.inputs],
                "outputs": [n.name for n in self.outputs], "do_not_merge": self.do_not_merge,
                "compute_nodes": self.compute_size(), "weight_bytes": self.weight_bytes}


@dataclass
class PartitionResult:
    strategy: str
    segments: list[Segment]
    rejected: dict[str, str] = field(default_factory=dict)  # node name -> reason
    notes: list[str] = field(default_factory=list)  # e.g. atomic groups over the budget
    optimal: bool | None = None  # global: True when its exact search finished

    def count(self, target: str) -> int:
        return sum(1 for s in self.segments if s.target == target)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.segments:
            out[s.target] = out.get(s.target, 0) + 1
        return out

    def transitions(self) -> int:
        """Changes of target between consecutive segments in execution order."""
        targets = [s.target for s in self.segments]
        return sum(1 for a, b in zip(targets, targets[1:]) if a != b)

    def to_json(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "counts": self.counts(),
                "segments": [s.to_json() for s in self.segments], "rejected": self.rejected,
                "notes": self.notes, "optimal": self.optimal}

    def __str__(self) -> str:
        lines = [f"partition ({self.strategy}): " + ", ".join(
            f"{n} {t}" for t, n in sorted(self.counts().items()))]
        for i, s in enumerate(self.segments):
            ops = [n.name for n in s.nodes]
            shown = ", ".join(ops[:6]) + (f", ... ({len(ops)} nodes)" if len(ops) > 6 else "")
            lines.append(f"  segment {i} [{s.target}] {shown}")
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)
