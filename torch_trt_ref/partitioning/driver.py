"""``partition``: the capability check, require_full_compilation, fusion groups, the chosen
strategy, then the rules every strategy shares: min_block_size, merging, resource
partitioning and tensor-only TensorRT boundaries."""

from __future__ import annotations

import gc
from collections import Counter
from contextlib import contextmanager

from torch.fx import GraphModule, Node

from .. import work
from ..conversion.registry import CONVERTERS, ConverterRegistry
from ..settings import CompilationSettings, op_name
from .atomic import find_atomic_groups
from .capability import check_nodes
from .hierarchical import accepts, backend_priority
from .quantized import follow_readers, quantizer_groups
from .resource import resource_partition
from .result import TENSORRT, TORCH, PartitionResult
from .rules import (  # noqa: F401  (fill_boundaries, merge_adjacent: re-exported)
    apply_min_block_size,
    boundary_violations,
    fill_boundaries,
    merge_adjacent,
)
from .strategies import STRATEGIES, register_strategy  # noqa: F401  (re-exported)
from .units import UnitGraph, build_units


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


def unit_graph(gm: GraphModule, settings: CompilationSettings, rejected: dict[Node, str],
               multi_backend: bool = False, atomic: list[list[Node]] | None = None,
               calls: list[Node] | None = None) -> UnitGraph:
    """The unit graph a strategy sees. Each node's target is tensorrt when it passed the
    capability check (not in ``rejected``), else torch; with ``multi_backend`` the first
    backend of ``backend_priority`` accepting it. Atomic groups count only when every
    member can run in TensorRT (there is no fusion to keep otherwise)."""
    if calls is None:
        calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    if atomic is None:
        atomic = [nodes for _, nodes in find_atomic_groups(gm)]
    atomic = [g for g in atomic if not any(n in rejected for n in g)]
    if multi_backend:
        priority = backend_priority(settings)
        ok = lambda n, b: accepts(n, b, n not in rejected, settings)
        node_target = {n: next(b for b in priority if ok(n, b)) for n in calls}
    else:
        priority = (TENSORRT, TORCH)
        ok = lambda n, b: b == TORCH or n not in rejected
        node_target = {n: TORCH if n in rejected else TENSORRT for n in calls}
    return build_units(node_target, ok, priority, atomic)


def partition(gm: GraphModule, settings: CompilationSettings,
              registry: ConverterRegistry = CONVERTERS,
              strategy: str | None = None,
              checked: dict[Node, str | None] | None = None) -> PartitionResult:
    """Assign every call_function node of ``gm`` to a segment.

    ``strategy`` overrides ``settings.partitioner`` (any name in ``STRATEGIES``, including
    the "linear" baseline); ``checked``: the capability check already made of ``gm``
    (``check_nodes``), else it is made here. Steps: capability check of every node (reasons kept);
    require_full_compilation raises listing unsupported ops with counts; units (fusion
    groups); the strategy; accelerator segments below min_block_size go to PyTorch (not
    under require_full_compilation, where the graph is fully supported); adjacent
    segments of one target merge; resource partitioning when enabled; a TensorRT segment
    that would pass a non-tensor across its boundary rejects the offending node and the
    plan is redone. Cost: O(N + E) for every strategy but global, whose exact search is
    bounded by ``global_partition.STATE_BUDGET`` states (see docs/partitioning.md)."""
    with _gc_paused():
        return _partition(gm, settings, registry, STRATEGIES[strategy or settings.partitioner],
                          checked)


@contextmanager
def _gc_paused():
    """Partitioning allocates many small containers and no reference cycles; pausing the
    cyclic collector avoids collections that walk every object of a large graph."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _partition(gm: GraphModule, settings: CompilationSettings, registry: ConverterRegistry,
               spec, checked: dict[Node, str | None] | None) -> PartitionResult:
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    if checked is None:
        checked = check_nodes(gm, settings, registry)
    rejected: dict[Node, str] = {}
    by_target: dict = {}  # one scan: capability and the index the pattern matcher uses
    for node in calls:
        reason = checked[node]
        if reason is not None:
            rejected[node] = reason
        by_target.setdefault(node.target, []).append(node)
    follow_readers(calls, rejected)
    if settings.require_full_compilation and rejected:
        raise _full_compilation_error(rejected)
    atomic = [nodes for _, nodes in find_atomic_groups(gm, by_target=by_target)]
    atomic += quantizer_groups(calls)
    while True:
        units = unit_graph(gm, settings, rejected, spec.multi_backend, atomic, calls)
        segments = spec.run(units, settings)
        work.add("partition.rounds")
        work.add("partition.units", len(units.nodes))
        work.add("partition.strategy_segments", len(segments))
        reasons = dict(units.reasons)  # after the strategy, which may add its own
        if not settings.require_full_compilation:
            segments = apply_min_block_size(segments, settings.min_block_size, reasons)
        segments = merge_adjacent(segments)
        notes: list[str] = list(units.notes)
        if settings.enable_resource_partitioning:
            segments = resource_partition(gm, segments, units, settings.engine_memory_budget,
                                          notes)
        fill_boundaries(gm, segments)
        bad = boundary_violations(segments)
        if not bad:
            break
        if settings.require_full_compilation:
            raise _full_compilation_error(bad)
        rejected.update(bad)
    why = {n.name: r for n, r in rejected.items()}
    for seg in segments:
        if seg.target != TENSORRT:
            for node in seg.nodes:
                if node.name not in why:
                    why[node.name] = reasons.get(node, f"assigned to {seg.target}")
    return PartitionResult(spec.name, segments, why, notes, units.optimal)
