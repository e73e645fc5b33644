"""The capability check (seed 002): is a node TensorRT-capable, and if not, why not.
The partitioner and the interpreter ask the same registry the same question."""

from __future__ import annotations

import operator
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

import torch
from torch.fx import GraphModule, Node

from .. import work
from .._trt import is_trt_dtype_supported
from ..conversion.registry import CONVERTERS, ConverterRegistry
from ..lowering.program import lowered
from ..settings import CompilationSettings, matches_op, op_name
from .modules import module_fallback_reason
from .quantized import describe, holds_quantizers, is_quantizer, quantized_weight
from .random_ops import random_reason

aten = torch.ops.aten

# Nodes that carry no computation of their own: they never count toward min_block_size.
BOOKKEEPING = {operator.getitem, aten.sym_size.int, aten.sym_numel.default,
               aten.sym_stride.int, aten.sym_storage_offset.default}
_SCALARS = (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)


def is_compute_node(node: Node) -> bool:
    """Does ``node`` count toward min_block_size? call_function nodes that compute tensors
    do; getitem, the sym_size family and Python scalar arithmetic on shapes (nodes whose
    value is a SymInt/int/float/bool) do not. Placeholders, weights and outputs do not.
    Nor do quantizers and the layout ops on a quantized weight: TensorRT fuses a Q/DQ pair
    into the op that reads it and folds a quantized weight, so quantizing a model never
    makes a segment big enough for an engine of its own (DESIGN D13)."""
    if node.op != "call_function" or node.target in BOOKKEEPING or is_quantizer(node) \
            or quantized_weight(node):
        return False
    return not isinstance(node.meta.get("val"), _SCALARS)


def _read_values(node: Node) -> list:
    """The values of ``node`` that TensorRT must hold: its output, where a multi-output op
    only the items something reads (a flash attention's RNG state may be uint64), and its
    inputs, where a getitem only the item it takes."""
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        read = {u.args[1] for u in node.users if u.target is operator.getitem}
        val = [v for i, v in enumerate(val) if i in read]
    if node.target is operator.getitem:
        return [val]
    return [val] + [a.meta.get("val") for a in node.all_input_nodes]


def _unsupported_dtype(node: Node) -> str | None:
    for v in _read_values(node):
        for t in (v if isinstance(v, (tuple, list)) else [v]):
            if isinstance(t, torch.Tensor) and not is_trt_dtype_supported(t.dtype):
                return f"dtype {t.dtype} is not supported by TensorRT"
    return None


def check_node(node: Node, settings: CompilationSettings,
               registry: ConverterRegistry = CONVERTERS) -> str | None:
    """None when ``node`` can run in TensorRT, else the reason it cannot (seed 002): it is
    not in torch_executed_ops, a converter is registered for its target, it is not impure,
    TensorRT has its dtypes, and some converter for it accepts it (its validator passes and,
    when the node has symbolic dims, it supports dynamic shapes or
    ``assume_dynamic_shape_support`` is set). Only call_function nodes are converted;
    get_attr weights go with the nodes that use them."""
    if node.op != "call_function":
        return f"{node.op} nodes are not converted"
    if matches_op(node.target, settings.torch_executed_ops):
        return "forced to PyTorch by torch_executed_ops"
    reason = module_fallback_reason(node, settings) or random_reason(node, settings)
    if reason:
        return reason
    if node.target not in registry:
        return f"no converter for {op_name(node.target)}"
    # Random ops (rand, randperm) are not side effects here: IFillLayer draws them, and
    # their converters' validators decide which variants convert.
    if node.is_impure(impure_random=False) and node.target is not operator.getitem:
        return "impure op (side effects)"
    reason = _unsupported_dtype(node)
    if reason:
        return reason
    _, reason = registry.select(node, settings)
    return reason


@dataclass
class SupportReport:
    """Per-operator support of a graph: counts and the reasons for rejections."""

    supported: Counter = field(default_factory=Counter)
    unsupported: Counter = field(default_factory=Counter)
    reasons: dict[str, dict[str, int]] = field(default_factory=dict)
    # quantizer node -> its precision and layout, and where it runs (DESIGN D13)
    quantizers: dict[str, str] = field(default_factory=dict)

    @property
    def n_supported(self) -> int:
        return sum(self.supported.values())

    @property
    def n_total(self) -> int:
        return self.n_supported + sum(self.unsupported.values())

    def to_json(self) -> dict[str, Any]:
        return {"supported": dict(self.supported), "unsupported": dict(self.unsupported),
                "reasons": self.reasons, "n_supported": self.n_supported,
                "n_total": self.n_total, "quantizers": self.quantizers}

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
        if self.quantizers:
            lines.append("Quantizers:")
            lines += [f"  {name}: {what}" for name, what in self.quantizers.items()]
        return "\n".join(lines)


def check_nodes(gm: GraphModule, settings: CompilationSettings,
                registry: ConverterRegistry = CONVERTERS) -> dict[Node, str | None]:
    """``check_node`` of every call_function node of ``gm``, in graph order. A compile
    checks once and hands the result to both ``support_report`` and ``partition``."""
    checked = {node: check_node(node, settings, registry)
               for node in gm.graph.nodes if node.op == "call_function"}
    work.add("partition.capability_checks", len(checked))
    return checked


def support_report(gm: GraphModule, settings: CompilationSettings,
                   registry: ConverterRegistry = CONVERTERS,
                   checked: dict[Node, str | None] | None = None) -> SupportReport:
    """Check every call_function node of ``gm`` (or take ``checked``, ``check_nodes`` of
    it); counts and reasons per operator."""
    report = SupportReport()
    if checked is None:
        checked = check_nodes(gm, settings, registry)
    for node, reason in checked.items():
        name = op_name(node.target)
        if reason is None:
            report.supported[name] += 1
        else:
            report.unsupported[name] += 1
            bucket = report.reasons.setdefault(name, {})
            bucket[reason] = bucket.get(reason, 0) + 1
        if holds_quantizers(node):
            report.quantizers[node.name] = describe(node) + (
                ", TensorRT" if reason is None else f", PyTorch: {reason}")
    return report


def get_graph_converter_support(gm: GraphModule | Any, torch_executed_ops: Iterable[Any] = (),
                                verbose: bool = True,
                                settings: CompilationSettings | None = None,
                                registry: ConverterRegistry = CONVERTERS) -> tuple[int, int]:
    """(supported, total) call_function nodes; prints the per-operator breakdown (the same
    data as a structure: ``support_report(gm, settings).to_json()``).

    ``gm`` is a lowered graph (``lowering.lower_program``), an ExportedProgram, or the
    graph of one (``ep.module()``). The latter two are lowered first, as ``compile`` would
    (the converters are written for the lowered op set: ``aten.linear`` is ``addmm`` by
    then), and the printout says so."""
    settings = (settings or CompilationSettings()).replace(torch_executed_ops=torch_executed_ops)
    gm, note = lowered(gm, settings)
    report = support_report(gm, settings, registry)
    if verbose:
        if note:
            print(note)
        print(report)
    return report.n_supported, report.n_total
