"""Latency (warm-up, then median/p90 of timed runs) and accuracy of a compiled model: max
abs error and cosine similarity against eager fp32, and the float64 rule
(``torch_trt_ref.accuracy``) against eager float64, scaled by eager's error in the cell's
precision."""

from __future__ import annotations

import copy
import gc
import statistics
import time
from typing import Any, Callable

import torch

from torch_trt_ref.accuracy import cast_floats, judge, tensors


def accuracy(reference: Any, result: Any) -> dict[str, Any]:
    """Max abs error and cosine similarity of all floating outputs, computed in float64.
    Output count or shape mismatches are errors, not numbers."""
    ref, got = tensors(reference), tensors(result)
    if len(ref) != len(got):
        raise ValueError(f"compiled model returned {len(got)} tensors, eager {len(ref)}")
    max_err, flat_ref, flat_got = 0.0, [], []
    for i, (a, b) in enumerate(zip(ref, got)):
        if a.shape != b.shape:
            raise ValueError(f"output {i}: shape {tuple(b.shape)}, eager {tuple(a.shape)}")
        if not a.is_floating_point():
            mismatches = int((a != b.to(a.dtype)).sum())
            if mismatches:
                raise ValueError(f"output {i}: {mismatches} integer elements differ")
            continue
        a64, b64 = a.detach().double().flatten(), b.detach().double().flatten()
        max_err = max(max_err, float((a64 - b64).abs().max()) if a64.numel() else 0.0)
        flat_ref.append(a64)
        flat_got.append(b64)
    cosine = None
    if flat_ref:
        a64, b64 = torch.cat(flat_ref), torch.cat(flat_got)
        cosine = float(torch.nn.functional.cosine_similarity(a64, b64, dim=0, eps=1e-30))
    scale = max((float(t.abs().max()) for t in flat_ref if t.numel()), default=0.0)
    return {"max_abs_error": max_err, "cosine": cosine, "reference_max_abs": scale,
            "outputs": len(ref)}


def run_cast(model: torch.nn.Module, args: tuple, kwargs: dict, dtype: torch.dtype,
             compute: torch.dtype | None = None) -> Any:
    """Outputs of a deep copy of ``model`` whose float weights are rounded to ``dtype``, on
    inputs rounded to ``dtype``; computed in ``compute`` (default ``dtype``), outputs
    rounded to ``dtype``. The copy is freed (and collected) before returning."""
    compute = compute or dtype
    clone = copy.deepcopy(model).to(dtype).to(compute)
    try:
        with torch.no_grad():
            out = clone(*cast_floats(cast_floats(args, dtype), compute),
                        **cast_floats(cast_floats(kwargs, dtype), compute))
        return cast_floats(out, dtype)
    finally:
        del clone
        gc.collect()


def references(model: torch.nn.Module, args: tuple, kwargs: dict, dtype: torch.dtype,
               eager_fp32: Any) -> tuple[Any, Any, list[str]]:
    """Eager in the cell's precision ``dtype`` (``eager_fp32`` itself for fp32), eager in
    float64 (None when the model cannot run in float64) and notes on any fallback. A model
    that fails in fp16/bf16 on this CPU (missing half kernel) runs with weights and inputs
    rounded to ``dtype``, computes in fp32 and rounds its outputs to ``dtype``."""
    notes = []
    eager = eager_fp32
    if dtype != torch.float32:
        try:
            eager = run_cast(model, args, kwargs, dtype)
        except (RuntimeError, NotImplementedError) as err:
            notes.append(f"eager {dtype} failed on this CPU ({type(err).__name__}: "
                         f"{str(err).splitlines()[0][:160]}); eager is computed in fp32 on "
                         f"{dtype} weights and inputs and rounded to {dtype}")
            eager = run_cast(model, args, kwargs, dtype, torch.float32)
    try:
        eager64 = run_cast(model, args, kwargs, torch.float64)
    except (RuntimeError, NotImplementedError) as err:
        notes.append(f"no float64 eager run ({type(err).__name__}: "
                     f"{str(err).splitlines()[0][:160]}); judged by the max abs tolerance")
        eager64 = None
    return eager, eager64, notes


def float64_rule(result: Any, eager: Any, eager64: Any | None, max_abs_error: float,
                 tolerance: float, notes: list[str]) -> dict[str, Any]:
    """The accuracy fields of the float64 rule: RMSE of the compiled result and of eager in
    the cell's precision against float64, their ratio, the allowed RMSE and ``passed``.
    Compiled outputs are compared in eager's dtype (the compiled module casts fp16/bf16
    outputs back to the model's fp32; the values are the precision's). Without a float64
    run, ``passed`` is ``max_abs_error <= tolerance`` and ``rule`` says so."""
    fields: dict[str, Any] = {"notes": notes}
    if eager64 is None:
        return {**fields, "rule": "tolerance", "compiled_rmse": None, "eager_rmse": None,
                "ratio": None, "allowed": tolerance, "passed": max_abs_error <= tolerance}
    got, want = tensors(result), tensors(eager)
    if len(got) == len(want):
        got = [g.to(w.dtype) if g.is_floating_point() and w.is_floating_point() else g
               for g, w in zip(got, want)]
    verdict = judge(got, want, tensors(eager64))
    summary, worst = verdict.to_json(), verdict.worst()
    return {**fields, "rule": "float64", "compiled_rmse": summary["compiled_rmse"],
            "eager_rmse": summary["eager_rmse"], "ratio": summary["ratio"],
            "allowed": worst.allowed_rmse if worst else 0.0,
            "eager_max_abs_error": summary["eager_max_abs"], "passed": verdict.passed,
            "message": verdict.message}


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between order statistics."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def latency(fn: Callable[[], Any], warmup: int = 2, runs: int = 10,
            max_seconds: float = 30.0, min_runs: int = 3,
            sync: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Time ``fn`` after ``warmup`` calls: ``runs`` calls, stopping early (after at least
    ``min_runs``) once ``max_seconds`` have been spent. Seconds, not milliseconds."""
    with torch.no_grad():
        for _ in range(warmup):
            fn()
        sync()
        times: list[float] = []
        start = time.perf_counter()
        while len(times) < runs:
            t0 = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - t0)
            if len(times) >= min_runs and time.perf_counter() - start > max_seconds:
                break
    return {"warmup": warmup, "runs": len(times), "median_s": statistics.median(times),
            "p90_s": percentile(times, 0.9), "min_s": min(times)}
