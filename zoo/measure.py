"""Latency (warm-up, then median/p90 of timed runs) and accuracy (max abs error, cosine
similarity) of a compiled model against eager fp32."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_leaves


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of a (nested) model output, in pytree order (ModelOutput included)."""
    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


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
