"""``reduce``: shrink a failing model to the smallest failing subgraph of its lowered graph
(delta debugging over FX nodes, as Polygraphy's ``debug reduce``) and write a repro."""

from __future__ import annotations

import dataclasses
import operator
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node

from .. import accuracy
from ..compiler import compile as compile_model
from ..conversion.registry import CONVERTERS
from .compare import Trace, reference_value, trace
from .graphs import cast_graph
from .report import DivergenceReport
from .repro import write_repro

MAX_TESTS = 48  # candidate compiles; each builds an engine


@dataclass
class Candidate:
    """A standalone subgraph: ``module`` in the precision, its inputs in the precision and
    in float64 (the values recorded at its boundary)."""

    nodes: list[str]
    module: GraphModule
    inputs: list[torch.Tensor]
    inputs64: list[torch.Tensor]


@dataclass
class Reduction:
    """What ``reduce`` found: the smallest failing subgraph, its verdict and the repro."""

    nodes: list[str]
    verdict: accuracy.Verdict | None
    tests: int
    script: Path | None = None
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        lines = [f"reduced to {len(self.nodes)} node(s) after {self.tests} candidate compiles: "
                 + ", ".join(self.nodes)]
        if self.verdict is not None:
            lines.append("verdict: " + (self.verdict.message or "passes"))
        if self.script is not None:
            lines.append(f"repro: python {self.script}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def reduce(model, inputs=(), kwarg_inputs=None, *, out_dir: str | Path = "torch_trt_ref_repro",
           report: DivergenceReport | None = None, registry=CONVERTERS, **kwargs) -> Reduction:
    """Find the smallest subgraph of the lowered graph whose compile (min_block_size=1)
    leaves the float64 rule, and write ``out_dir/repro.py`` (+ ``repro.pt``) rebuilding,
    compiling and judging it. ``report`` is not needed; the model is traced again."""
    t = trace(model, inputs, kwarg_inputs, registry=registry, check_model=False, **kwargs)
    return reduce_trace(t, out_dir)


def reduce_trace(t: Trace, out_dir: str | Path = "torch_trt_ref_repro") -> Reduction:
    nodes = [n for n in t.gm.graph.nodes if n.op == "call_function"]
    first = t.report.first_divergence
    if first is not None:
        sink = next(n for n in nodes if n.name == first.node)
    else:  # only the outputs fail: the node producing the first failing output
        sink = _failing_output(t)
        if sink is None:
            return Reduction([], None, 0, notes=["nothing fails: no node and no output "
                                                 "leaves the float64 rule"])
    ancestors = _ancestors(sink)
    order = [n for n in nodes if n in ancestors]  # topological, ends with the sink
    tester = _Tester(t)
    # 1. the sink alone; 2. the shortest failing suffix (binary search); 3. ddmin.
    if tester.fails([sink]):
        keep = [sink]
    else:
        keep = _shortest_suffix(order, tester)
        if keep is None:
            return Reduction([], None, tester.count, notes=[
                "no subgraph ending at the divergent node fails on its own; the failure "
                "needs the whole model (compile it with min_block_size=1 to check)"])
        keep = _ddmin(keep, sink, tester)
    names = [n.name for n in keep]
    cand = tester.candidate(keep)
    verdict = tester.verdicts[tuple(names)]
    script = write_repro(Path(out_dir), cand, t, verdict)
    return Reduction(names, verdict, tester.count, script)


def _failing_output(t: Trace) -> Node | None:
    if t.report.outputs is None or t.report.outputs.passed:
        return None
    output = next(n for n in t.gm.graph.nodes if n.op == "output")
    flat = [a for a in torch.utils._pytree.tree_leaves(output.args[0]) if isinstance(a, Node)]
    bad = [o.index for o in t.report.outputs.outputs if not o.passed]
    i = bad[0] if bad else 0
    node = flat[i] if i < len(flat) else None
    while node is not None and node.op == "call_function" and node.all_input_nodes and \
            node.target is torch.ops.aten._to_copy.default:  # the precision's final cast
        node = node.all_input_nodes[0]
    return node if node is not None and node.op == "call_function" else None


def _ancestors(node: Node) -> set[Node]:
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in seen or n.op != "call_function":
            continue
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return seen


def _prune(keep: list[Node], sink: Node) -> list[Node]:
    """The nodes of ``keep`` the sink still depends on through ``keep``."""
    inside, live, stack = set(keep), set(), [sink]
    while stack:
        n = stack.pop()
        if n in live or n not in inside:
            continue
        live.add(n)
        stack.extend(n.all_input_nodes)
    return [n for n in keep if n in live]


def _shortest_suffix(order: list[Node], tester: "_Tester") -> list[Node] | None:
    """The shortest failing ``order[i:]`` (binary search on i; failing is assumed monotone
    in the suffix length, as in Polygraphy's bisect mode)."""
    if not tester.fails(order):
        return None
    lo, hi = 0, len(order) - 1  # order[lo:] fails; order[hi:] (the sink alone) passes
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if tester.fails(_prune(order[mid:], order[-1])):
            lo = mid
        else:
            hi = mid
    return _prune(order[lo:], order[-1])


def _ddmin(keep: list[Node], sink: Node, tester: "_Tester") -> list[Node]:
    """Zeller's ddmin over the nodes other than the sink: drop chunks while it fails."""
    n = 2
    while len(keep) > 1 and tester.count < MAX_TESTS:
        others = [x for x in keep if x is not sink]
        size = max(1, len(others) // n)
        chunks = [others[i:i + size] for i in range(0, len(others), size)]
        for chunk in chunks:
            trial = _prune([x for x in keep if x not in chunk], sink)
            if tester.fails(trial):
                keep, n = trial, max(n - 1, 2)
                break
        else:
            if size == 1:
                break
            n = min(n * 2, len(others))
    return keep


class _Tester:
    """Compiles candidates and remembers verdicts (by node names)."""

    def __init__(self, t: Trace):
        self.t = t
        self.count = 0
        self.verdicts: dict[tuple[str, ...], accuracy.Verdict] = {}

    def candidate(self, keep: list[Node]) -> Candidate:
        return subgraph(self.t, keep)

    def fails(self, keep: list[Node]) -> bool:
        key = tuple(n.name for n in keep)
        if key not in self.verdicts:
            if self.count >= MAX_TESTS:
                return False
            self.count += 1
            self.verdicts[key] = judge_candidate(self.candidate(keep), self.t)
        return not self.verdicts[key].passed


def subgraph(t: Trace, keep: list[Node]) -> Candidate:
    """``keep`` as a standalone GraphModule: values from outside become placeholders fed
    with the recorded eager (precision) and float64 values; weights become buffers; the
    nodes used after the subgraph (or its last node) are the outputs."""
    graph, root, env = Graph(), torch.nn.Module(), {}
    inside = set(keep)
    inputs, inputs64 = [], []

    def lookup(n: Node) -> Node:
        if n in env:
            return env[n]
        if n.op == "get_attr":
            value = operator.attrgetter(n.target)(t.gm)
            name = f"w{len(list(root.buffers()))}"
            root.register_buffer(name, value.detach().clone())
            env[n] = graph.get_attr(name)
        else:
            env[n] = graph.placeholder(n.name)
            inputs.append(_tensor(t.eager[n.name]))
            inputs64.append(_tensor(reference_value(n, t.ref)))
        env[n].meta = dict(n.meta)
        return env[n]

    for node in keep:
        for arg in node.all_input_nodes:
            if arg not in inside:
                lookup(arg)
    for node in keep:
        env[node] = graph.node_copy(node, lookup)
    outs = [env[n] for n in keep if any(u not in inside for u in n.users)] or [env[keep[-1]]]
    graph.output(outs[0] if len(outs) == 1 else tuple(outs))
    return Candidate([n.name for n in keep], GraphModule(root, graph), inputs, inputs64)


def _tensor(value: Any) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"a subgraph input is a {type(value).__name__}, not a tensor")
    return value.detach().clone()


def judge_candidate(cand: Candidate, t: Trace) -> accuracy.Verdict:
    """Compile the candidate with the trace's settings and min_block_size=1 and judge it
    against its own eager run (precision) and float64 run."""
    settings = dataclasses.replace(t.settings, min_block_size=1, progress=False)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            compiled = compile_model(cand.module, cand.inputs, settings=settings,
                                     registry=t.registry)
            got = compiled(*cand.inputs)
            eager = cand.module(*cand.inputs)
            ref = cast_graph(cand.module)(*cand.inputs64)
    except Exception as err:  # a candidate that does not compile is not the failure
        return accuracy.Verdict([], True, f"candidate skipped: {type(err).__name__}: {err}")
    return accuracy.judge(got, eager, ref)
