"""``CompileReport``: what one compile did — phases, segments, support, engines — as data
(JSON for tools) and as text for humans."""

from __future__ import annotations

import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

# Exclusive phases: "engine" is an engine's creation but the builder call (network snapshot,
# cache key, builder config), "build" the TensorRT builder call alone, "weights" taking
# ownership of the weights and the refit program once every segment is built.
PHASES = ("capture", "lowering", "partition", "conversion", "engine", "build", "weights")


@dataclass
class EngineRecord:
    name: str
    layers: int
    plan_bytes: int
    weight_bytes: int
    build_seconds: float
    executor: str
    inputs: list[dict] = field(default_factory=list)
    converters: dict[str, int] = field(default_factory=dict)
    cache_hit: bool = False
    cache_refit: bool = False  # the cached engine held other weights and was refit
    plan_current: bool = True  # False: only the snapshot was refit (no TensorRT runtime)
    # output -> the input whose memory it shares: a KV cache written in place (DESIGN D15)
    aliases: dict[str, str] = field(default_factory=dict)
    profiles: int = 1  # optimization profiles (Input(profiles=...))


@dataclass
class CompileReport:
    settings: dict[str, Any] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=lambda: {p: 0.0 for p in PHASES})
    # CPU seconds of this process per phase: unlike wall time, not inflated by other
    # processes on a shared machine
    phases_cpu: dict[str, float] = field(default_factory=lambda: {p: 0.0 for p in PHASES})
    partition: dict[str, Any] = field(default_factory=dict)
    support: dict[str, Any] = field(default_factory=dict)
    engines: list[EngineRecord] = field(default_factory=list)
    fallbacks: dict[str, str] = field(default_factory=dict)  # segment -> why it runs in torch
    # PyTorch segment -> its nodes that run in float32 (no fp16/bf16 kernel on the device)
    upcasts: dict[str, list[str]] = field(default_factory=dict)
    # "node by node", or why the program was retraced whole (see compiler.lower_program)
    lowering: str = ""
    # enable_autocast: per float node {node, op, dtype, reason, module} (lowering/autocast.py)
    autocast: list[dict] = field(default_factory=list)
    # the sizes each compiled module runs, when the trace did not cover a declared range
    # (Note [Sizes the trace does not cover] in size_cover.py); this report is the first's
    size_branches: list[dict] = field(default_factory=list)
    # declared sizes outside the traced range, or where a condition of the trace fails
    # (Note [Conditions over several sizes]), at which this module was checked against eager
    untraced_sizes: list[dict] = field(default_factory=list)
    # declared sizes where the model raises in eager, and so the compiled module: {sizes, error}
    raising_sizes: list[dict] = field(default_factory=list)
    # how a TorchScript model became a graph (empty for nn.Module / ExportedProgram)
    frontend: str = ""
    peak_rss_bytes: int | None = None
    # dryrun=True: nothing was converted or built; ``plan`` is dryrun.plan_summary's data
    dryrun: bool = False
    plan: dict[str, Any] = field(default_factory=dict)
    # [wall, cpu] of the phases opened inside each open phase
    _open: list = field(default_factory=list, repr=False, compare=False)

    @contextmanager
    def phase(self, name: str):
        """Time the block as phase ``name`` (added up over calls), wall and CPU. Phases are
        exclusive: a phase opened inside another is not counted in the outer one (the
        builder call, "build", inside "engine")."""
        start, cpu = time.perf_counter(), time.process_time()
        self._open.append([0.0, 0.0])
        try:
            yield
        finally:
            inner_wall, inner_cpu = self._open.pop()
            wall, used = time.perf_counter() - start, time.process_time() - cpu
            self.phases[name] = self.phases.get(name, 0.0) + wall - inner_wall
            self.phases_cpu[name] = self.phases_cpu.get(name, 0.0) + used - inner_cpu
            if self._open:
                self._open[-1][0] += wall
                self._open[-1][1] += used

    @property
    def counts(self) -> dict[str, int]:
        counts = dict(self.partition.get("counts", {}))
        if self.fallbacks:
            counts["tensorrt"] = counts.get("tensorrt", 0) - len(self.fallbacks)
            counts["torch"] = counts.get("torch", 0) + len(self.fallbacks)
        return counts

    @property
    def executors(self) -> dict[str, str]:
        return {e.name: e.executor for e in self.engines}

    def seconds_outside_builder(self, cpu: bool = False) -> float:
        """Every phase but the TensorRT builder call ("build"): wall seconds, or with
        ``cpu`` the process's CPU seconds."""
        phases = self.phases_cpu if cpu else self.phases
        return sum(v for k, v in phases.items() if k != "build")

    def to_json(self) -> dict[str, Any]:
        return {"settings": self.settings, "phases": self.phases,
                "phases_cpu": self.phases_cpu, "partition": self.partition,
                "support": self.support, "engines": [e.__dict__ for e in self.engines],
                "fallbacks": self.fallbacks, "upcasts": self.upcasts, "lowering": self.lowering,
                "autocast": self.autocast, "frontend": self.frontend,
                "size_branches": self.size_branches,
                "untraced_sizes": self.untraced_sizes, "raising_sizes": self.raising_sizes,
                "peak_rss_bytes": self.peak_rss_bytes,
                "counts": self.counts, "dryrun": self.dryrun, "plan": self.plan}

    def render(self) -> str:
        if self.dryrun:
            return render_dry_run(self)
        counts = self.counts
        sup = self.support
        lines = [
            f"segments: {counts.get('tensorrt', 0)} TensorRT, {counts.get('torch', 0)} PyTorch"
            + "".join(f", {n} {t}" for t, n in counts.items() if t not in ("tensorrt", "torch")),
            f"supported ops: {sup.get('n_supported', 0)}/{sup.get('n_total', 0)} call_function "
            "nodes",
        ]
        for op, n in sorted(sup.get("unsupported", {}).items()):
            why = "; ".join(sup.get("reasons", {}).get(op, {}))
            lines.append(f"  unsupported {op} x{n}: {why}")
        quantizers = Counter(w.split(",")[0] for w in sup.get("quantizers", {}).values())
        if quantizers:
            lines.append("quantizers: " + ", ".join(f"{w} x{n}" for w, n in quantizers.items()))
        if self.frontend:
            lines.append(f"frontend: {self.frontend}")
        if self.lowering:
            lines.append(f"lowering: {self.lowering}")
        if self.autocast:
            fp32 = [d for d in self.autocast if d["dtype"] == "fp32"]
            lines.append(f"autocast: {len(self.autocast) - len(fp32)} of {len(self.autocast)} "
                         "float nodes in low precision; in fp32:")
            lines += [f"  {d['node']} ({d['op']}): {d['reason']}" for d in fp32]
        for b in self.size_branches:
            lines.append(f"compiled separately for {b['sizes']}: {b['counts']}")
        if self.untraced_sizes:
            lines.append(f"outside the traced sizes, checked against eager at "
                         f"{self.untraced_sizes}")
        for r in self.raising_sizes:
            lines.append(f"raises as eager does at {r['sizes']}: {r['error']}")
        lines.append("time per phase: " + ", ".join(
            f"{p} {s:.2f}s" for p, s in self.phases.items()))
        if self.peak_rss_bytes is not None:
            lines.append(f"peak RSS above baseline: {self.peak_rss_bytes / 2**20:.1f} MiB")
        total_plan = sum(e.plan_bytes for e in self.engines)
        lines.append(f"engines: {len(self.engines)}, {total_plan / 2**20:.2f} MiB of plans")
        for e in self.engines:
            stale = "" if e.plan_current else " (snapshot only: no TensorRT runtime here)"
            built = (f"engine cache hit + refit{stale}" if e.cache_refit
                     else "from the engine cache" if e.cache_hit
                     else f"built in {e.build_seconds:.2f}s")
            lines.append(f"  {e.name}: {e.layers} layers, {e.plan_bytes / 2**20:.2f} MiB, "
                         f"{built}, executor={e.executor}")
        for name, why in self.fallbacks.items():
            lines.append(f"  {name}: fell back to PyTorch -- {why}")
        for name, nodes in self.upcasts.items():
            lines.extend(f"  {name}: {line}" for line in nodes)
        return "\n".join(lines)


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
        weights = (f", weights {s['weight_bytes'] / mib:.2f} MiB" if s["target"] == "tensorrt"
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
