"""The measurements, run inside one fresh (forked) process per group: a zoo model compiled
once (process CPU seconds per phase and in total, wall, peak RSS, latency, work counters),
a converter family's conversion loop (>= 50 ms a round), and the canaries (a loop; a cold
export of a fixed module).

Each returns ``{series name: {"type", "unit", "value"}}``. Only the public API
(``torch_trt_ref.compile``, ``compile_report``) and the interpreter are used, so the same
code measures an older commit's library (the gate runs it on a base checkout:
perf/gate/confirm.py; Note [What the measurement code may import])."""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from . import counting, inject
from .suites import CANARY_SERIES, COLD_CANARY

# Note [What the measurement code may import]: a measuring server imports this module, the
# zoo's model registry (zoo/registry.py, entry.py, models/) and the conformance runner and
# case modules (perf/gate/families.py) beside the library of the tree it measures, which is
# an older commit's on the base side of an A/B. So those modules import, at module level,
# only library names that have existed since before the harness moved (69d9405); a newer
# name (a renamed constant, a new runtime module) is imported inside the function that needs
# it. A base at 69d9405 could not start a server when zoo/entry.py imported QUANT_FORMATS and
# conformance/runner.py runtime.profiles at the top (issue 37): tests/test_perf_confirm.py
# starts servers on that commit's library. A case module the base cannot import leaves its
# family's cases out (families.SKIPPED); a group the base cannot run at all is left
# unconfirmed (confirm.BaseCannotMeasure).
ROUND_SECONDS = 0.05  # a micro-benchmark round lasts at least this much CPU time
ROUNDS = 5
LATENCY_RUNS = 10
LATENCY_SECONDS = 0.5  # stop timing calls after this much (at least 3 calls)
LATENCY_WARMUP_SECONDS = 0.02  # untimed calls first, at least one (Note [Latency warm-up])

# Note [Latency warm-up]: in a freshly forked measuring process the first calls of a compiled
# module are slower, by more than the calls themselves last when the graph is small: the
# lgamma_graph module (~60 us a call) ran its first 10 calls at ~90 us, calls 10-50 at
# 62-72 us and every later call at 58-59 us, in each of 8 processes (min per window). With
# one warm-up call, the latency series was the minimum of calls 2-11, so it moved with
# that transient: its A/B-screen samples on unchanged code had 1.7x outliers, and a replay
# of them (sensitivity.replayed) found a +50% slower call in only 44% of pairs. The warm-up
# now lasts LATENCY_WARMUP_SECONDS (~300 calls there, 1 call of resnet18's ~100 ms).


def _s(type_: str, unit: str, value: float) -> dict:
    return {"type": type_, "unit": unit, "value": float(value)}


def measure(group: str, prepared: dict, spec: dict | None = None,
            cases: list[str] | None = None) -> dict[str, dict]:
    """The series of ``group``; ``cases``: of a family, only the graphs of these case ids
    (an A/B converts the cases both trees built)."""
    kind, _, arg = group.partition(":")
    if prepared.get("tier") == "counts":  # the count tier (a count server's child)
        if kind == "compile":
            return counting.count_compile(arg, spec)
        if kind == "llm":
            return counting.count_llm(arg, spec)
        if kind == "family":
            return counting.count_family(arg, _select(prepared["families"][arg], cases), spec)
        raise ValueError(f"the count tier counts compile:MODEL and family:NAME, not {group!r}")
    if kind == "compile":
        return compile_model(arg, spec)
    if kind == "llm":
        return llm_model(arg, spec)
    if kind == "family":
        return family(arg, _select(prepared["families"][arg], cases), spec)
    if kind == "canary":
        return canary()
    raise ValueError(f"unknown group {group!r}; accepted: compile:MODEL, llm:MODEL, "
                     "family:NAME, canary")


def compile_model(name: str, spec: dict | None = None) -> dict[str, dict]:
    import torch_trt_ref
    from torch_trt_ref.memory import PeakRSS
    from zoo.registry import get

    entry = get(name)
    model = entry.factory()
    args, kwargs = entry.inputs()
    compile_fn = inject.compile_hook(torch_trt_ref.compile, spec)
    with inject.unsupported(spec), inject.lowering_hook(spec), _counting() as counts, \
            PeakRSS() as rss:
        cpu, wall = time.process_time(), time.perf_counter()
        compiled = compile_fn(model, args, kwargs, **entry.compile_settings)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        more = inject.more_memory(spec, rss)  # held until the block's exit samples it
    del more
    report = compiled.compile_report
    prefix = f"compile/{name}"
    out = {f"{prefix}/cpu/total": _s("cpu", "s", cpu),
           f"{prefix}/wall/total": _s("wall", "s", wall),
           f"{prefix}/rss/peak": _s("rss", "MiB", rss.above_baseline / 2**20),
           f"{prefix}/latency": _s("latency", "s", _latency(
               inject.latency_hook(compiled, spec), args, kwargs))}
    for phase, seconds in report.phases_cpu.items():
        out[f"{prefix}/cpu/{phase}"] = _s("cpu", "s", seconds)
    for key, n in {**_report_counts(report), **counts}.items():
        out[f"{prefix}/count/{key}"] = _s("count", "1", n)
    return out


def llm_model(name: str, spec: dict | None = None) -> dict[str, dict]:
    """A 2-layer decoder (torch_trt_ref.llm.models) compiled over a static KV cache
    (counting.LLM_SHAPE; process CPU seconds, per phase too), then its prefill latency and
    per-token decode latency (``llm_steps``), peak RSS, engines and cache bytes.
    ``spec``'s ``compile_slower`` slows llm.compile down (perf/gate/inject.py)."""
    import torch_trt_ref.llm as llm
    from torch_trt_ref.llm.models import build
    from torch_trt_ref.memory import PeakRSS

    model = build(name)
    compile_fn = inject.compile_hook(llm.compile, spec)
    with PeakRSS() as rss:
        cpu = time.process_time()
        compiled = compile_fn(model, **counting.LLM_SHAPE)
        cpu = time.process_time() - cpu
    prefill, decode = llm_steps(compiled)
    report, prefix = compiled.compile_report, f"llm/{name}"
    out = {f"{prefix}/cpu/total": _s("cpu", "s", cpu),
           f"{prefix}/rss/peak": _s("rss", "MiB", rss.above_baseline / 2**20),
           f"{prefix}/latency/prefill": _s("latency", "s", prefill),
           f"{prefix}/latency/decode": _s("latency", "s", decode),
           f"{prefix}/count/engines": _s("count", "1", len(report.engines)),
           f"{prefix}/count/cache_bytes": _s("count", "B", report.kv_cache.bytes)}
    for phase, seconds in report.phases_cpu.items():
        out[f"{prefix}/cpu/{phase}"] = _s("cpu", "s", seconds)
    return out


def llm_steps(compiled) -> tuple[float, float]:
    """Wall seconds to the first token of ``llm.generate`` on counting.LLM_PROMPT tokens (the
    prefill) and the fastest of its counting.LLM_NEW - 1 decode steps, after a warm-up
    generation."""
    import torch_trt_ref.llm as llm

    for _ in range(2):  # the first generation is the warm-up
        stamps = [time.perf_counter()]
        llm.generate(compiled, counting.llm_prompt(), max_new_tokens=counting.LLM_NEW,
                     eos_token_id=None, on_token=lambda _: stamps.append(time.perf_counter()))
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    return gaps[0], min(gaps[1:])


def _counting():
    """torch_trt_ref.work's counters; an older library without them counts nothing."""
    try:
        from torch_trt_ref.work import counting
    except ImportError:
        import contextlib

        return contextlib.nullcontext({})
    return counting()


def _report_counts(report) -> dict[str, int]:
    support = report.support
    counts = report.counts
    return {"segments.tensorrt": counts.get("tensorrt", 0),
            "segments.torch": counts.get("torch", 0),
            "unsupported_nodes": support.get("n_total", 0) - support.get("n_supported", 0),
            "converter_calls": sum(sum(e.converters.values()) for e in report.engines),
            "layers": sum(e.layers for e in report.engines),
            "plan_bytes": sum(e.plan_bytes for e in report.engines)}


def _latency(compiled, args, kwargs) -> float:
    """Minimum wall seconds of one call after LATENCY_WARMUP_SECONDS of untimed calls
    (LATENCY_RUNS calls, fewer once LATENCY_SECONDS are spent; Note [Latency warm-up])."""
    times: list[float] = []
    with torch.no_grad():
        warm = time.perf_counter() + LATENCY_WARMUP_SECONDS
        compiled(*args, **kwargs)
        while time.perf_counter() < warm:
            compiled(*args, **kwargs)
        while len(times) < LATENCY_RUNS and (len(times) < 3 or sum(times) < LATENCY_SECONDS):
            start = time.perf_counter()
            compiled(*args, **kwargs)
            times.append(time.perf_counter() - start)
    return min(times)


def _select(graphs: list, cases: list[str] | None) -> list:
    if cases is None:
        return graphs
    built = {g[0]: g for g in graphs}
    missing = sorted(set(cases) - set(built))
    if missing:
        raise ValueError(f"cases not built by this tree: {', '.join(missing)}")
    return [built[c] for c in cases]


def family(name: str, graphs: list, spec: dict | None = None) -> dict[str, dict]:
    """CPU seconds of one pass of the interpreter over the family's one-op graphs: the
    minimum over ROUNDS rounds, each looping passes until ROUND_SECONDS of CPU are spent
    (the loop count is fixed by a warm-up, so every round does the same work)."""
    from torch_trt_ref.conversion.interpreter import Interpreter
    from torch_trt_ref.settings import CompilationSettings

    settings = CompilationSettings()

    def one_pass() -> int:
        layers = 0
        for _, gm, specs in graphs:
            layers += Interpreter(gm, specs, settings).run().net.num_layers
        return layers

    one_pass()
    start = time.process_time()
    layers = one_pass()
    loops = max(1, math.ceil(ROUND_SECONDS / max(time.process_time() - start, 1e-6)))

    def per_pass() -> float:
        """CPU seconds of one pass, from a round of ``loops`` passes."""
        start = time.process_time()
        for _ in range(loops):
            one_pass()
        return (time.process_time() - start) / loops

    per_pass.loops = loops
    with inject.family_hook(name, spec, per_pass):
        rounds = [per_pass() for _ in range(ROUNDS)]
    return {f"family/{name}/cpu": _s("cpu", "s", min(rounds)),
            f"family/{name}/count/layers": _s("count", "1", layers)}


def canary() -> dict[str, dict]:
    """A fixed CPU loop (Python integers and small torch matmuls) that no commit changes:
    when it moves, the machine moved (see gate.drift); and the cold canary, measured first
    while the process is still cold."""
    cold = cold_canary()
    rounds = []
    for _ in range(ROUNDS):
        start = time.process_time()
        x = 0
        for i in range(100_000):
            x += i * i % 7
        a = torch.full((64, 64), 0.01)
        for _ in range(300):
            a = torch.tanh(a @ a)
        rounds.append(time.process_time() - start)
    return {CANARY_SERIES: _s("cpu", "s", min(rounds)),
            COLD_CANARY: _s("cpu", "s", cold)}


class _ColdNet(torch.nn.Module):
    """A fixed module the cold canary exports: torch's code, none of ours."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(10))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x)) + x
        return x


def cold_canary() -> float:
    """CPU seconds of what a cold compile does and the canary loop does not, with code no
    commit changes: torch.export of a fixed module and its decomposition to ATen, the
    first in this process (new pages, copied pages, cold caches). A neighbour contending
    for memory (invisible to the load average) slowed compiles 25-36% and a 40-layer version
    of this x1.33, while the loop and the family micro-benchmarks moved less than 5%; it
    sees only what overlaps its own processes (docs/regressions.md, "Disturbed runs")."""
    start = time.process_time()
    program = torch.export.export(_ColdNet(), (torch.ones(2, 8),))
    program.run_decompositions()
    return time.process_time() - start


def load_family_graphs() -> dict[str, Any]:
    """{family: [(case id, lowered one-op graph, input specs)]}, built once by the
    worker."""
    from .families import FAMILIES, graphs

    return {name: graphs(cases) for name, cases in FAMILIES.items()}
