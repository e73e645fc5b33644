"""The capability check (seed 002): is a node TensorRT-capable, and if not, why not.
The partitioner and the interpreter ask the same registry the same question."""

from __future__ import annotations

import operator
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import GraphModule, Node

from .._trt import is_trt_dtype_supported
from ..conversion.interpreter import select_converter
from ..conversion.registry import CONVERTERS, ConverterRegistry
from ..settings import CompilationSettings, matches_op, op_name

# Nodes that carry no computation of their own: they never count toward min_block_size.
BOOKKEEPING = {operator.getitem, torch.ops.aten.sym_size.int}


def is_compute_node(node: Node) -> bool:
    """call_function nodes that do work (not getitem or shape bookkeeping)."""
    return node.op == "call_function" and node.target not in BOOKKEEPING


def _unsupported_dtype(node: Node) -> str | None:
    vals = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
    for v in vals:
        for t in (v if isinstance(v, (tuple, list)) else [v]):
            if isinstance(t, torch.Tensor) and not is_trt_dtype_supported(t.dtype):
                return f"dtype {t.dtype} is not supported by TensorRT"
    return None


def check_node(node: Node, settings: CompilationSettings,
               registry: ConverterRegistry = CONVERTERS) -> str | None:
    """None when ``node`` can run in TensorRT, else the reason it cannot."""
    if node.op != "call_function":
        return f"{node.op} nodes are not converted"
    if matches_op(node.target, settings.torch_executed_ops):
        return "forced to PyTorch by torch_executed_ops"
    if node.target not in registry:
        return f"no converter for {op_name(node.target)}"
    if node.is_impure() and node.target is not operator.getitem:
        return "impure op (side effects)"
    reason = _unsupported_dtype(node)
    if reason:
        return reason
    _, reason = select_converter(node, settings, registry)
    return reason


@dataclass
class SupportReport:
    """Per-operator support of a graph: counts and the reasons for rejections."""

    supported: Counter = field(default_factory=Counter)
    unsupported: Counter = field(default_factory=Counter)
    reasons: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def n_supported(self) -> int:
        return sum(self.supported.values())

    @property
    def n_total(self) -> int:
        return self.n_supported + sum(self.unsupported.values())

    def to_json(self) -> dict[str, Any]:
        return {"supported": dict(self.supported), "unsupported": dict(self.unsupported),
                "reasons": self.reasons, "n_supported": self.n_supported,
                "n_total": self.n_total}

    def __str__(self) -> str:
        lines = [f"{self.n_supported}/{self.n_total} call_function nodes supported by TensorRT"]
        if self.supported:
            lines.append("Supported:")
            lines += [f"  {op}: {n}" for op, n in sorted(self.supported.items())]
        if self.unsupported:
            lines.append("Unsupported:")
            for op, n in sorted(self.unsupported.items()):
                why = "; ".join(f"{r} (x{c})" for r, c in self.reasons[op].items())
                lines.append(f"  {op}: {n} -- {why}")
        return "\n".join(lines)


def support_report(gm: GraphModule, settings: CompilationSettings,
                   registry: ConverterRegistry = CONVERTERS) -> SupportReport:
    report = SupportReport()
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = op_name(node.target)
        reason = check_node(node, settings, registry)
        if reason is None:
            report.supported[name] += 1
        else:
            report.unsupported[name] += 1
            bucket = report.reasons.setdefault(name, {})
            bucket[reason] = bucket.get(reason, 0) + 1
    return report


def get_graph_converter_support(gm: GraphModule, torch_executed_ops=(), verbose: bool = True,
                                settings: CompilationSettings | None = None) -> tuple[int, int]:
    """(supported, total) call_function nodes; prints the per-operator breakdown."""
    settings = (settings or CompilationSettings()).replace(torch_executed_ops=torch_executed_ops)
    report = support_report(gm, settings)
    if verbose:
        print(report)
    return report.n_supported, report.n_total
