"""Test-only slowdowns for the gate's sensitivity check (perf/gate/sensitivity.py), installed in
the measuring process only when a measurement request carries an ``inject`` spec; library
code paths never see them otherwise. Specs:

- ``{"family": NAME, "slower": 0.2}``: every converter of family NAME spins so one pass over
  the family's graphs costs 20% more CPU than without the injection (the spin per converter
  call is fixed from rounds measured before and after wrapping the converters);
- ``{"compile_slower": 0.3}``: ``compile()`` spins 30% of its own CPU time after returning;
- ``{"lowering_slower": 0.4}``: the whole-program lowering (``lower_program``, inside the
  ``lowering`` phase) spins 40% of its own CPU time before returning, so only that phase
  (and the total) moves;
- ``{"unsupported": "aten.relu.default"}``: the op's converters reject every node;
- ``{"rss_more": 0.2}``: after ``compile()`` returns, inside the peak-RSS block, memory is
  touched until the block's peak above its baseline is 20% higher (``more_memory``);
- ``{"latency_slower": 0.2}``: every call of the compiled module waits 20% of its own wall
  time after returning (``latency_hook``), so only the latency series moves."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time


def spin(seconds: float) -> None:
    """Burn ``seconds`` of this process's CPU time."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def slowed(fn, slower: float):
    """``fn`` spinning ``slower`` x its own CPU time after each call (inside any phase it
    runs in)."""
    @functools.wraps(fn)
    def slow(*args, **kwargs):
        start = time.process_time()
        result = fn(*args, **kwargs)
        spin(slower * (time.process_time() - start))
        return result

    return slow


def compile_hook(compile_fn, spec: dict | None):
    slower = (spec or {}).get("compile_slower")
    return slowed(compile_fn, slower) if slower else compile_fn


def more_memory(spec: dict | None, rss) -> bytearray | None:
    """``rss_more``: a buffer, touched page by page, that lifts the peak RSS ``rss`` (a
    torch_trt_ref.memory.PeakRSS block in progress) has seen above its baseline by that
    fraction: it fills the gap from the RSS now to the raised peak. Keep it alive until the
    block ends (its exit samples the RSS once more)."""
    more = (spec or {}).get("rss_more")
    if not more:
        return None
    import psutil

    target = rss.peak + more * (rss.peak - rss.baseline)
    size = max(0, int(target - psutil.Process().memory_info().rss))
    buffer = bytearray(size)  # calloc'd: untouched pages are not resident
    buffer[::_PAGE] = b"\1" * len(range(0, size, _PAGE))
    return buffer


_PAGE = 4096


def latency_hook(compiled, spec: dict | None):
    """``latency_slower``: ``compiled`` waiting (busy, on the wall clock) that fraction of
    each call's wall time after it returns."""
    slower = (spec or {}).get("latency_slower")
    if not slower:
        return compiled

    def slow(*args, **kwargs):
        start = time.perf_counter()
        result = compiled(*args, **kwargs)
        end = time.perf_counter() + slower * (time.perf_counter() - start)
        while time.perf_counter() < end:
            pass
        return result

    return slow


@contextlib.contextmanager
def lowering_hook(spec: dict | None):
    """``lowering_slower``: ``torch_trt_ref.compiler.lower_program`` (the name ``compile``
    calls) made that much slower for the duration; the spin is inside the phase."""
    slower = (spec or {}).get("lowering_slower")
    if not slower:
        yield
        return
    from torch_trt_ref import compiler

    plain = compiler.lower_program
    compiler.lower_program = slowed(plain, slower)
    try:
        yield
    finally:
        compiler.lower_program = plain


@contextlib.contextmanager
def _replaced(select, change):
    """Replace the registry entries ``select(support)`` picks by ``change(support)``."""
    from torch_trt_ref.conversion.registry import CONVERTERS

    saved = {t: list(b) for t, b in CONVERTERS.entries.items()}
    for bucket in CONVERTERS.entries.values():
        bucket[:] = [change(s) if select(s) else s for s in bucket]
    try:
        yield
    finally:
        for target, bucket in saved.items():
            CONVERTERS.entries[target][:] = bucket


@contextlib.contextmanager
def unsupported(spec: dict | None):
    op = (spec or {}).get("unsupported")
    if not op:
        yield
        return
    reject = lambda node, settings: f"made unsupported by perf.gate.inject ({op})"
    with _replaced(lambda s: s.name == op or str(s.target) == op,
                   lambda s: dataclasses.replace(s, capability_validator=reject)):
        yield


@contextlib.contextmanager
def family_hook(name: str, spec: dict | None, per_pass):
    """Slow family ``name`` down by ``spec["slower"]``: ``per_pass()`` returns the CPU
    seconds of one pass (as a measured round does); the spin per converter call makes a
    pass with the wrappers installed cost (1 + slower) x a pass without them."""
    if not spec or spec.get("family") != name:
        yield
        return
    calls, per_call = [0], [0.0]

    def counted(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            calls[0] += 1
            spin(per_call[0])
            return fn(*args, **kwargs)
        return wrapper

    plain = min(per_pass() for _ in range(2))
    with _replaced(lambda s: s.family == name,
                   lambda s: dataclasses.replace(s, implementation=counted(s.implementation))):
        calls[0] = 0
        wrapped = min(per_pass() for _ in range(2))
        if not calls[0]:  # e.g. composites: lowering decomposes every one of its ops
            raise ValueError(f"cannot slow family {name} down: none of its converters ran "
                             "on its graphs (lowering replaced their ops); inject a family "
                             "whose converters convert its cases, e.g. elementwise")
        calls_per_pass = calls[0] / _passes(per_pass)
        per_call[0] = max(0.0, (1 + spec["slower"]) * plain - wrapped) / calls_per_pass
        yield


def _passes(per_pass) -> int:
    """How many passes two calls of ``per_pass`` made (its ``loops`` attribute x 2)."""
    return 2 * getattr(per_pass, "loops", 1)
