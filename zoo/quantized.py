"""Quantized cells (precision ``int8`` / ``fp8`` / ``nvfp4``, DESIGN D13): the model is
quantized with ``torch_trt_ref.quantize`` on seeded random calibration batches shaped like
its inputs, compiled in fp32 around the Q/DQ nodes, and judged by the float64 rule against
the eager quantized model; cosine and top-1 agreement with the fp32 model are reported,
not judged."""

from __future__ import annotations

import time
from typing import Any

import torch

from torch_trt_ref.quantization import quantize
from torch_trt_ref.quantization.ties import judge_tie_aware
from torch_trt_ref.runtime.module import EngineModule

from . import measure
from .entry import seeded

CALIBRATION_BATCHES = 4


def calibration_batches(args: tuple, kwargs: dict, n: int = CALIBRATION_BATCHES) -> list:
    """``n`` batches like the example inputs: float tensors ~ N(0, 1), integer tensors (token
    ids) uniform over [0, max of the example], from seeded generators (seeds 100 + i)."""
    def like(t, generator):
        if not isinstance(t, torch.Tensor):
            return t
        if t.is_floating_point():
            return torch.randn(t.shape, generator=generator, dtype=t.dtype)
        return torch.randint(0, int(t.max()) + 1 if t.numel() else 1, t.shape,
                             generator=generator, dtype=t.dtype)

    batches = []
    for i in range(n):
        g = seeded(100 + i)
        batches.append({**{f"_{j}": like(a, g) for j, a in enumerate(args)},
                        **{k: like(v, g) for k, v in kwargs.items()}})
    return [_Batch(b, len(args)) for b in batches]


class _Batch(dict):
    """A calibration batch holding positional and keyword inputs."""

    def __init__(self, values: dict, positional: int):
        super().__init__(values)
        self.positional = positional


class _Caller(torch.nn.Module):
    """Calls the model with a _Batch's positional and keyword inputs (quantize takes one
    batch object per call)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, batch):
        args = [batch[f"_{j}"] for j in range(batch.positional)]
        kwargs = {k: v for k, v in batch.items() if not k.startswith("_")}
        return self.model(*args, **kwargs)


def prepare(model: torch.nn.Module, precision: str, args: tuple, kwargs: dict,
            attention: bool = False) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The quantized model and the calibration part of the cell's ``quantization`` record
    (``attention``: quantizers on attention's batched matmuls too)."""
    batches = calibration_batches(args, kwargs)
    start = time.perf_counter()
    wrapped = quantize(_Caller(model), [(b,) for b in batches], precision=precision,
                       progress=False, attention=attention)
    seconds = time.perf_counter() - start
    return wrapped.model, {"precision": precision, "algorithm": "max",
                           "calibration_batches": len(batches),
                           "calibration_seconds": seconds,
                           "quantized_layers": len(wrapped.quantization["layers"]),
                           "attention": len(wrapped.quantization["attention"])}


def layer_counts(compiled: torch.nn.Module) -> dict[str, int]:
    """QUANTIZE / DEQUANTIZE / DYNAMIC_QUANTIZE layers over the compiled module's engines."""
    kinds = [layer.kind for m in compiled.modules() if isinstance(m, EngineModule)
             for layer in m.engine.snapshot.layers]
    return {k.lower(): kinds.count(k) for k in ("QUANTIZE", "DEQUANTIZE", "DYNAMIC_QUANTIZE")}


def top1_agreement(reference: Any, result: Any) -> float | None:
    """Share of rows whose argmax over the last dim agrees (first floating output)."""
    from torch_trt_ref.accuracy import tensors

    pairs = [(a, b) for a, b in zip(tensors(reference), tensors(result))
             if a.is_floating_point() and a.dim() >= 1 and a.numel()]
    if not pairs:
        return None
    a, b = pairs[0]
    return float((a.argmax(-1) == b.argmax(-1)).double().mean())


def accuracy(qmodel, args, kwargs, reference_fp32, result, tolerance: float) -> dict[str, Any]:
    """Max abs error and cosine against eager fp32 (reported), and the float64 rule against
    the eager quantized model: eager fp32 vs float64 of the quantized model (its quantizers
    keep their float32 grid, Note [Quantizer arithmetic]); if that fails, the tie-aware
    rule (torch_trt_ref/quantization/ties.py) decides and ``ties`` records its flips."""
    acc = measure.accuracy(reference_fp32, result)
    with torch.no_grad():
        eager_q = qmodel(*args, **kwargs)
    eager, eager64, notes = measure.references(qmodel, args, kwargs, torch.float32, eager_q)
    fake = measure.accuracy(eager_q, result)
    rule = measure.float64_rule(result, eager, eager64, fake["max_abs_error"], tolerance, notes)
    if eager64 is not None and not rule["passed"]:  # docs/quantization.md, "Rounding ties"
        verdict, ties = judge_tie_aware(qmodel, args, kwargs, result, eager)
        worst = verdict.worst()
        rule.update(passed=verdict.passed, message=verdict.message, ties=ties,
                    tie_aware=True, ratio=worst.ratio if worst else 0.0,
                    compiled_rmse=worst.compiled_rmse if worst else 0.0)
    acc.update(rule, tolerance=tolerance,
               oracle="eager quantized model", top1_vs_fp32=top1_agreement(reference_fp32,
                                                                            result))
    return acc
