"""The count tier's measurement: exact counts of the interpreted work one compile does, per
compile phase, that do not depend on the machine's speed or its neighbours (docs/
regressions.md, "The count tier"). Inside the counted block a ``sys.setprofile`` hook counts
Python function calls by the package of the called code (ours, torch, other) and the C
functions our own code calls (into torch, into TensorRT), and a ``sys.settrace`` hook counts
the bytecodes executed in our own code (``f_trace_opcodes``). Each event is put on the phase
that ``CompileReport.phase`` has open innermost (the phases are exclusive, as their CPU
seconds are); work outside every phase is ``other``."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections import Counter
from typing import Iterator

import torch

import torch_trt_ref
from torch_trt_ref.conversion.interpreter import Interpreter
from torch_trt_ref.settings import CompilationSettings

KINDS = ("ops", "calls.ours", "calls.torch", "calls.other", "c.torch", "c.trt", "c.other")


def _package_dir(module) -> str:
    return os.path.dirname(os.path.abspath(module.__file__)) + os.sep


class WorkCounter:
    """Counts per phase (``counts[phase][kind]``, kinds in KINDS) while ``active()``."""

    def __init__(self):
        self.ours = _package_dir(torch_trt_ref)
        self.torch = _package_dir(torch)
        self.counts: dict[str, Counter] = {}
        self._stack = ["other"]
        self._now = self._phase("other")
        self._burn = burner(self.ours)

    def _phase(self, name: str) -> Counter:
        return self.counts.setdefault(name, Counter())

    def enter(self, name: str) -> None:
        self._stack.append(name)
        self._now = self._phase(name)

    def leave(self) -> None:
        self._stack.pop()
        self._now = self._phase(self._stack[-1])

    # -- hooks ----------------------------------------------------------------------
    def _profile(self, frame, event, arg):
        if event == "call":
            name = frame.f_code.co_filename
            self._now["calls.ours" if name.startswith(self.ours)
                      else "calls.torch" if name.startswith(self.torch)
                      else "calls.other"] += 1
        elif event == "c_call" and frame.f_code.co_filename.startswith(self.ours):
            self._now[_c_kind(arg)] += 1

    def _trace(self, frame, event, arg):
        if frame.f_code.co_filename.startswith(self.ours):
            frame.f_trace_lines = False
            frame.f_trace_opcodes = True
            return self._opcode
        return None

    def _opcode(self, frame, event, arg):
        if event == "opcode":
            self._now["ops"] += 1
        return self._opcode

    def burn(self, more: float, done: Counter) -> None:
        """Add ``more`` x the work in ``done`` (one phase entry's or one pass's counts):
        test-only (perf.inject), counted as our own code."""
        calls = done["calls.ours"] + done["calls.torch"] + done["calls.other"]
        ops = round(more * done["ops"])
        self._burn(ops, min(round(more * calls), ops // 10))

    @contextlib.contextmanager
    def active(self) -> Iterator["WorkCounter"]:
        """Count the block's work on this thread, with the garbage collector off (a
        collection runs finalizers at points that depend on what was allocated before)."""
        enabled = gc.isenabled()
        gc.disable()
        sys.setprofile(self._profile)
        sys.settrace(self._trace)
        try:
            yield self
        finally:
            sys.settrace(None)
            sys.setprofile(None)
            if enabled:
                gc.enable()


def _c_kind(fn) -> str:
    owner = getattr(fn, "__self__", None)
    module = getattr(fn, "__module__", None) or type(owner).__module__ or ""
    if module.startswith("tensorrt"):
        return "c.trt"
    if module.startswith("torch"):
        return "c.torch"
    return "c.other"


@contextlib.contextmanager
def phases_to(counter: WorkCounter, more: dict[str, float] | None = None) -> Iterator[None]:
    """Route ``CompileReport.phase`` blocks to ``counter`` (a library without phases
    counts everything as ``other``). ``more``: test-only extra work per phase (perf.inject:
    {phase: 0.05} adds 5% to the bytecodes and calls each entry of that phase counted)."""
    try:
        from torch_trt_ref.report import CompileReport
    except ImportError:
        yield
        return
    timed = CompileReport.phase

    @contextlib.contextmanager
    def phase(self, name: str):
        counter.enter(name)
        before = Counter(counter.counts[name])
        try:
            with timed(self, name):
                yield
            if (more or {}).get(name):
                counter.burn(more[name], counter.counts[name] - before)
        finally:
            counter.leave()

    CompileReport.phase = phase
    try:
        yield
    finally:
        CompileReport.phase = timed


# Test-only extra work (perf.inject) must count as our own code's: compiled under a file name
# inside the library's folder, it is traced as the library is. The library never runs it.
_BURN = """
def _call():
    return None


def burn(ops, calls):
    for _ in range(calls):
        _call()
    for _ in range(max(0, (ops - 10 * calls) // 3)):
        pass
"""
# bytecodes per call of ``_call`` in ``burn``'s loop (7 in the loop, 3 in ``_call``), and per
# iteration of its second loop (FOR_ITER, STORE_FAST, JUMP_BACKWARD): CPython 3.11


def burner(ours: str):
    scope: dict = {}
    exec(compile(_BURN, os.path.join(ours, "_perf_inject_burn.py"), "exec"), scope)
    return scope["burn"]

# -- the measurements (run in a forked child of the count server) ----------------------
TOTAL = "total"


def _s(unit: str, value: int) -> dict:
    return {"type": "work", "unit": unit, "value": float(value)}


def _per_phase(counts: dict[str, Counter]) -> dict[str, dict[str, int]]:
    """{phase or "total": {"ops", "calls", "torch_calls", "trt_calls"}}: ``calls`` is every
    Python call (ours, torch's, others'), ``torch_calls`` torch's Python calls plus the C
    functions of torch our code calls, ``trt_calls`` the TensorRT API calls of our code."""
    out = {}
    for phase, c in counts.items():
        out[phase] = {"ops": c["ops"],
                      "calls": c["calls.ours"] + c["calls.torch"] + c["calls.other"],
                      "torch_calls": c["calls.torch"] + c["c.torch"], "trt_calls": c["c.trt"]}
    out[TOTAL] = {k: sum(p[k] for p in out.values()) for k in
                  ("ops", "calls", "torch_calls", "trt_calls")}
    return out


def compile_series(name: str, counts: dict[str, Counter], kind: str = "compile"
                   ) -> dict[str, dict]:
    """The count tier's series of one compile: bytecodes of our code (``ops``) and Python
    calls (``calls``) per phase and in total; calls into torch and TensorRT in total."""
    out = {}
    for phase, c in _per_phase(counts).items():
        out[f"{kind}/{name}/ops/{phase}"] = _s("ops", c["ops"])
        out[f"{kind}/{name}/calls/{phase}"] = _s("calls", c["calls"])
    total = _per_phase(counts)[TOTAL]
    out[f"{kind}/{name}/torch_calls/{TOTAL}"] = _s("calls", total["torch_calls"])
    out[f"{kind}/{name}/trt_calls/{TOTAL}"] = _s("calls", total["trt_calls"])
    return out


def family_series(name: str, counts: dict[str, Counter]) -> dict[str, dict]:
    total = _per_phase(counts)[TOTAL]
    return {f"family/{name}/ops": _s("ops", total["ops"]),
            f"family/{name}/calls": _s("calls", total["calls"]),
            f"family/{name}/trt_calls": _s("calls", total["trt_calls"])}


def count_compile(name: str, spec: dict | None = None) -> dict[str, dict]:
    """The count tier's series of one cold compile of zoo model ``name`` (the child of a
    count server that built every model of the suite before forking: what the server
    holds changes the counts of torch's code, so every child starts from the same state).
    ``spec``: test-only extra work ({"count_more": 0.05, "phase": "lowering"}, or
    "phase": "*" for every phase and the work outside them: perf.inject)."""
    from zoo.registry import get

    entry = get(name)
    model = entry.factory()
    args, kwargs = entry.inputs()
    counter = WorkCounter()
    more, phase = (spec or {}).get("count_more"), (spec or {}).get("phase")
    per_phase = ({} if not more else {p: more for p in _PHASES} if phase == "*"
                 else {phase: more})
    with phases_to(counter, per_phase), counter.active():
        torch_trt_ref.compile(model, args, kwargs, **entry.compile_settings)
        if more and phase == "*":
            counter.burn(more, Counter(counter.counts["other"]))
    return compile_series(name, counter.counts)


_PHASES = ("capture", "lowering", "partition", "conversion", "engine", "build", "weights")

# the LLM groups' workload (issue 39): a static cache of 24 positions, a 16-token prompt
LLM_PROMPT, LLM_NEW = 16, 8
LLM_SHAPE = {"max_seq_len": LLM_PROMPT + LLM_NEW, "max_prompt_len": LLM_PROMPT}


def llm_prompt() -> torch.Tensor:
    """The fixed prompt of the LLM groups: [1, LLM_PROMPT] token ids."""
    return (torch.arange(LLM_PROMPT) % 97 + 3).unsqueeze(0)


def count_llm(name: str, spec: dict | None = None) -> dict[str, dict]:
    """The count tier's series of decoder ``name`` (torch_trt_ref.llm.models): llm.compile
    per compile phase, and its greedy generation of LLM_NEW tokens as phase ``generate``
    (the runtime's and the reference executor's own Python work per step). ``spec``:
    test-only extra work, as for ``count_compile``."""
    import torch_trt_ref.llm as llm
    from torch_trt_ref.llm.models import build

    model = build(name)
    counter = WorkCounter()
    more, phase = (spec or {}).get("count_more"), (spec or {}).get("phase")
    with phases_to(counter, {phase: more} if more else {}), counter.active():
        compiled = llm.compile(model, **LLM_SHAPE)
        counter.enter("generate")
        llm.generate(compiled, llm_prompt(), max_new_tokens=LLM_NEW, eos_token_id=None)
        if more and phase == "generate":
            counter.burn(more, Counter(counter.counts["generate"]))
        counter.leave()
    # torch's Python calls under torch.export of a transformers model and its lowering
    # moved by up to 1.7% between processes of one server (4 runs at cc0d10e): only our
    # own bytecodes (``ops``) and the TensorRT calls are kept, which repeat exactly
    series = compile_series(name, counter.counts, kind="llm")
    return {n: v for n, v in series.items() if "/ops/" in n or "/trt_calls/" in n}


def count_family(name: str, graphs: list, spec: dict | None = None) -> dict[str, dict]:
    """The count tier's series of one pass of the interpreter over family ``name``'s
    one-op graphs, after one uncounted pass (the family micro-benchmark's warm-up: a
    converter's first call in a process does first-time work). ``spec``: test-only extra
    work ({"count_more": 0.05, "family": name})."""
    settings = CompilationSettings()

    def one_pass() -> None:
        for _, gm, specs in graphs:
            Interpreter(gm, specs, settings).run()

    one_pass()
    counter = WorkCounter()
    with counter.active():
        one_pass()
        if spec and spec.get("family") == name and spec.get("count_more"):
            counter.burn(spec["count_more"], Counter(counter.counts["other"]))
    return family_series(name, counter.counts)
