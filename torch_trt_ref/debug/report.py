"""The divergence report: per FX node errors of the compiled and eager values against
float64, the verdict of the float64 rule, and where the error starts; text and JSON."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from .. import accuracy


@dataclass
class ErrorStats:
    """Absolute error of a value against its float64 reference."""

    max: float
    mean: float
    median: float
    rmse: float

    @staticmethod
    def of(value: torch.Tensor, reference: torch.Tensor) -> "ErrorStats":
        diff = (value.detach().double() - reference.detach().double()).abs().flatten()
        finite = diff[torch.isfinite(diff)]
        if finite.numel() == 0:
            return ErrorStats(0.0, 0.0, 0.0, accuracy.rmse(value, reference))
        return ErrorStats(float(finite.max()), float(finite.mean()), float(finite.median()),
                          accuracy.rmse(value, reference))


@dataclass
class NodeRecord:
    """One node of the lowered graph: where it ran, who built it and how far off it is."""

    node: str
    op: str
    runs_on: str  # "tensorrt", "pytorch" or another backend
    segment: str | None = None  # e.g. _run_on_tensorrt_0
    converter: str | None = None  # "module:function" of the converter that built it
    dtype: str = ""
    shape: tuple[int, ...] = ()
    compiled: ErrorStats | None = None  # compiled value vs float64
    eager: ErrorStats | None = None  # the lowered graph run eagerly in the precision
    allowed_rmse: float = math.nan
    within: bool | None = None  # None: not compared (see note)
    note: str = ""


@dataclass
class LoweringDivergence:
    """The lowered graph itself, run in float64, disagrees with the model in float64."""

    route: str
    message: str
    node: str | None = None  # first lowered node whose float64 value is wrong
    original: str | None = None  # the captured (pre-lowering) node it stands for
    op: str = ""  # the captured node's op
    module: str = ""  # the model submodule the captured node belongs to (nn_module_stack)
    node_rmse: float = math.nan
    node_allowed: float = math.nan


@dataclass
class DivergenceReport:
    """What ``torch_trt_ref.debug.compare`` found; ``render()`` for people, ``to_json()``
    for tools."""

    settings: dict[str, Any]
    nodes: list[NodeRecord]
    outputs: accuracy.Verdict | None = None  # compiled outputs vs the model in float64
    lowering_route: str = ""
    lowering: LoweringDivergence | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def first_divergence(self) -> NodeRecord | None:
        """The first node, in topological order, whose compiled value leaves the rule."""
        return next((r for r in self.nodes if r.within is False), None)

    @property
    def passed(self) -> bool:
        return (self.first_divergence is None and self.lowering is None
                and (self.outputs is None or self.outputs.passed))

    def to_json(self) -> dict[str, Any]:
        first = self.first_divergence
        return {"passed": self.passed, "settings": self.settings,
                "first_divergence": asdict(first) if first else None,
                "outputs": self.outputs.to_json() if self.outputs else None,
                "lowering_route": self.lowering_route,
                "lowering": asdict(self.lowering) if self.lowering else None,
                "notes": self.notes, "nodes": [asdict(r) for r in self.nodes]}

    def summary(self) -> str:
        lines = []
        compared = [r for r in self.nodes if r.within is not None]
        trt = sum(1 for r in compared if r.runs_on == "tensorrt")
        lines.append(f"compared {len(compared)} of {len(self.nodes)} nodes against float64 "
                     f"({trt} run in TensorRT, {len(compared) - trt} in PyTorch); "
                     f"lowering: {self.lowering_route}")
        if self.outputs is not None:
            lines.append("outputs vs the model in float64: " + (
                "within the float64 rule" if self.outputs.passed else self.outputs.message))
        if self.lowering is not None:
            low = self.lowering
            lines.append(f"DIVERGENCE IN LOWERING ({low.route}): {low.message}")
            if low.node:
                lines.append(f"  first lowered node whose float64 value is wrong: {low.node}, "
                             f"which stands for captured node {low.original} ({low.op}"
                             f"{' in ' + low.module if low.module else ''}): RMSE "
                             f"{low.node_rmse:.3g} > allowed {low.node_allowed:.3g}")
        first = self.first_divergence
        if first is None:
            lines.append("no node of the compiled graph leaves the float64 rule")
        else:
            where = f"{first.runs_on} segment {first.segment}"
            by = f", converter {first.converter}" if first.converter else ""
            lines.append(f"FIRST DIVERGENCE: node {first.node} ({first.op}) in {where}{by}: "
                         f"RMSE {first.compiled.rmse:.3g} > allowed {first.allowed_rmse:.3g} "
                         f"(eager {first.eager.rmse:.3g}; max abs {first.compiled.max:.3g})")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def render(self, all_nodes: bool = False, context: int = 4) -> str:
        """The summary and a table of nodes: all of them, or those around the first
        divergence (the worst ten by compiled/allowed when there is none)."""
        rows = [r for r in self.nodes if r.within is not None or all_nodes]
        if not all_nodes:
            first = self.first_divergence
            if first is not None:
                i = rows.index(first)
                rows = rows[max(0, i - context): i + context + 1]
            else:
                rows = sorted(rows, key=lambda r: -_ratio(r))[:10]
                rows.sort(key=self.nodes.index)
        return self.summary() + "\n" + _table(rows)


def _ratio(r: NodeRecord) -> float:
    if r.compiled is None or not r.allowed_rmse > 0:
        return 0.0
    return r.compiled.rmse / r.allowed_rmse


def _short(converter: str | None) -> str:
    """``pkg.converters.matmul:mm`` -> ``matmul.mm``."""
    if not converter:
        return ""
    module, _, name = converter.partition(":")
    return f"{module.rsplit('.', 1)[-1]}.{name.rsplit('.', 1)[-1]}"


def _fmt(x: float) -> str:
    return f"{x:.2e}"


def _table(rows: list[NodeRecord]) -> str:
    head = ["node", "op", "runs on", "converter", "compiled max/mean/median",
            "eager max/mean/median", "rmse/allowed", "ok"]
    body = []
    for r in rows:
        c = "/".join(_fmt(v) for v in (r.compiled.max, r.compiled.mean, r.compiled.median)) \
            if r.compiled else "-"
        e = "/".join(_fmt(v) for v in (r.eager.max, r.eager.mean, r.eager.median)) \
            if r.eager else "-"
        ratio = f"{_ratio(r):.2f}" if r.compiled else "-"
        ok = {True: "yes", False: "NO", None: r.note or "-"}[r.within]
        conv = _short(r.converter) if r.runs_on == "tensorrt" else ""
        where = f"{r.runs_on}:{(r.segment or '').rsplit('_', 1)[-1]}"
        body.append([r.node, r.op.removeprefix("aten."), where, conv, c, e, ratio, ok])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)] if body else []
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip()
             for row in [head, *body]]
    return "\n".join(lines)
