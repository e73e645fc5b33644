"""Measure one cell in this process: eager fp32 reference, compile under a peak-RSS sampler,
accuracy (the float64 rule) and latency. ``python -m zoo.cell`` runs one cell for the
harness's subprocess."""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import sys
import time
import traceback
from typing import Any

import torch

import torch_trt_ref
from torch_trt_ref.capture import capture
from torch_trt_ref.lowering import lower_program
from torch_trt_ref.settings import (
    ENGINE_MEMORY_MULTIPLIER,
    PRECISION_DTYPES,
    CompilationSettings,
)

from . import measure, quantized
from .matrix import Cell
from .registry import get
from .rss import PhaseRSS
from .schema import SCHEMA_VERSION, environment


def _warm_up_capture() -> float:
    """Capture and lower a two-op module once per process, so a cell's compile time is the
    model's own and not torch.export's one-time initialization (lazy imports, operator
    tables; ~0.5 s). Runs once per process (``process_warmup``): in the forkserver for
    forked cells (zoo/forkserver_init.py); no TensorRT work happens here, so no builder
    threads exist before a fork."""
    start = time.perf_counter()
    settings = CompilationSettings()
    tiny = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU()).eval()
    lower_program(capture(tiny, [torch.randn(2, 4)], {}), settings)
    return time.perf_counter() - start


_WARMUP_SECONDS: list[float] = []


def process_warmup() -> float:
    """Seconds the one warm-up of this process took (``_warm_up_capture``, run on the first
    call)."""
    if not _WARMUP_SECONDS:
        _WARMUP_SECONDS.append(_warm_up_capture())
    return _WARMUP_SECONDS[0]


def _error(stage: str, err: BaseException) -> dict[str, Any]:
    tb = traceback.format_exception(type(err), err, err.__traceback__)
    return {"stage": stage, "type": type(err).__name__, "message": str(err)[:2000],
            "traceback": "".join(tb)[-4000:]}


def settings_for(cell: Cell, weight_bytes: int, base: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    """Compile keyword settings of a cell (on top of the entry's ``base`` settings).
    Resource partitioning gets a CPU budget whose per-engine share is ``budget_fraction`` of
    the weights in the cell's precision."""
    precision = cell.compile_precision
    kwargs: dict[str, Any] = {**(base or {}), "partitioner": cell.strategy,
                              "precision": precision}
    if cell.resource_partitioning:
        itemsize = PRECISION_DTYPES[precision].itemsize
        engine_budget = max(1, int(weight_bytes * itemsize / 4 * cell.budget_fraction))
        kwargs.update(enable_resource_partitioning=True,
                      cpu_memory_budget=ENGINE_MEMORY_MULTIPLIER * engine_budget)
    return kwargs


def _compile_metrics(compiled, report, weight_bytes: int) -> dict[str, Any]:
    counts = report.counts
    engines = report.engines
    support = report.support
    phases = dict(report.phases)
    return {
        "partition": {"engines": len(engines), "torch_segments": counts.get("torch", 0),
                      "planned_tensorrt_segments": report.partition.get("counts", {}).get(
                          "tensorrt", 0),
                      "transitions": compiled.partition_result.transitions(),
                      "fallbacks": dict(report.fallbacks)},
        "ops": {"supported": support.get("n_supported", 0), "total": support.get("n_total", 0),
                "unsupported": dict(support.get("unsupported", {})),
                "reasons": {op: sorted(r) for op, r in support.get("reasons", {}).items()}},
        "phases": phases,
        "compile_seconds": sum(phases.values()),
        "outside_builder_seconds": report.seconds_outside_builder(),
        "outside_builder_cpu_seconds": report.seconds_outside_builder(cpu=True),
        "phases_cpu": dict(report.phases_cpu),
        "engines": {"count": len(engines), "plan_bytes": sum(e.plan_bytes for e in engines),
                    "weight_bytes": sum(e.weight_bytes for e in engines),
                    "largest_weight_bytes": max((e.weight_bytes for e in engines), default=0),
                    "layers": sum(e.layers for e in engines),
                    "build_seconds": [round(e.build_seconds, 4) for e in engines]},
        "settings": {k: report.settings.get(k) for k in (
            "partitioner", "precision", "min_block_size", "enable_resource_partitioning",
            "cpu_memory_budget", "executor")},
    }


def _accuracy(model, args, kwargs, reference, result, dtype: torch.dtype,
              tolerance: float) -> dict[str, Any]:
    """Max abs error / cosine vs eager fp32, and the float64 rule: eager in the cell's
    precision and eager float64 each run on a deep copy of the model, after the compile's
    RSS sampler has stopped and freed before latency is measured."""
    acc = measure.accuracy(reference, result)
    eager, eager64, notes = measure.references(model, args, kwargs, dtype, reference)
    acc.update(measure.float64_rule(result, eager, eager64, acc["max_abs_error"], tolerance,
                                    notes), tolerance=tolerance)
    return acc


def run_cell(cell: Cell, warmup: int = 2, runs: int = 10, max_seconds: float = 20.0) -> dict:
    """One record: every metric that could be measured; ``status`` is "ok" or "error"
    with the failing stage, error type and message."""
    process_warmup()  # once per process, before anything is built or timed
    if cell.is_llm:  # a decoder generating over a static KV cache: its own record
        from .llm_cells import run_llm_cell

        return run_llm_cell(cell, warmup, runs, max_seconds)
    record: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "cell": cell.to_json(),
                              "status": "ok", "error": None, "env": {
                                  **environment(), "runner": "local", "node": platform.node(),
                                  "pid": os.getpid()}}
    stage = "build_model"
    try:
        entry = get(cell.model)
        model = entry.factory()
        args, kwargs = entry.inputs()
        weight_bytes = entry.weight_bytes(model)
        record["model"] = {"description": entry.description, "weight_bytes": weight_bytes,
                           "params": sum(p.numel() for p in model.parameters()),
                           "largest_tensor_bytes": max(
                               (t.numel() * t.element_size() for t in model.state_dict().values()),
                               default=0),
                           "tolerance": entry.tolerance(cell.precision)}
        stage = "eager"
        with torch.no_grad():
            reference = model(*args, **kwargs)
        # the reference call above was the warm-up; eager timing is context, keep it short
        record["eager_latency"] = measure.latency(lambda: model(*args, **kwargs), 0,
                                                  min(runs, 5), max_seconds / 4)
        fp32_model = model
        if cell.quant_format is not None:
            stage = "quantize"
            model, record["quantization"] = quantized.prepare(model, cell.quant_format, args,
                                                              kwargs)
        stage = "compile"
        settings = settings_for(cell, weight_bytes, entry.compile_settings)
        compile_args, compile_kwargs = (entry.dynamic if cell.dynamic and entry.dynamic
                                        else (args, kwargs))
        gc.collect()
        cpu_start = time.process_time()
        with PhaseRSS() as rss:
            compiled = torch_trt_ref.compile(model, compile_args, compile_kwargs, **settings)
        record["compile_cpu_seconds"] = time.process_time() - cpu_start
        record["process_warmup_seconds"] = process_warmup()
        record.update(_compile_metrics(compiled, compiled.compile_report, weight_bytes))
        record["memory"] = {"peak_rss_bytes": rss.above_baseline, "baseline_rss_bytes":
                            rss.baseline, "weight_bytes": weight_bytes,
                            "peak_by_phase": rss.peak_by_phase(record["phases"])}
        if cell.resource_partitioning:
            record["engines"]["engine_memory_budget"] = settings["cpu_memory_budget"] // (
                ENGINE_MEMORY_MULTIPLIER)
        stage = "run"
        executors = sorted(set(torch_trt_ref.executors_used(compiled).values()))
        with torch.no_grad():
            result = compiled(*args, **kwargs)
        stage = "accuracy"
        if model is not fp32_model:
            record["quantization"].update(quantized.layer_counts(compiled))
            record["accuracy"] = quantized.accuracy(model, args, kwargs, reference, result,
                                                    entry.tolerance(cell.precision))
        else:
            record["accuracy"] = _accuracy(model, args, kwargs, reference, result,
                                           PRECISION_DTYPES[cell.compile_precision],
                                           entry.tolerance(cell.precision))
        del result
        gc.collect()
        stage = "latency"
        lat = measure.latency(lambda: compiled(*args, **kwargs), warmup, runs, max_seconds)
        lat.update(executor="+".join(executors) or "none (all PyTorch)",
                   device=str(next((a.device for a in args if isinstance(a, torch.Tensor)),
                                   "cpu")))
        record["latency"] = lat
    except Exception as err:  # the sweep records the failure and goes on
        record["status"] = "error"
        record["error"] = _error(stage, err)
    return record


def measure_cell(cell_json: dict, measure: dict) -> dict:
    """The record of one cell measured in this (fresh) process, with the process's CPU
    seconds."""
    process_warmup()  # as at import before: not part of the cell's seconds
    start = time.perf_counter()
    record = run_cell(Cell.from_json(cell_json), **measure)
    record["cell_seconds"] = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    return record


def run_to_file(cell_json: dict, out: str, measure: dict, log: str | None = None) -> None:
    """Measure one cell and write its record as JSON to ``out`` (the forked runner's entry;
    stdout/stderr go to ``log`` so warnings do not garble the progress bar)."""
    if log is not None:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    record = measure_cell(cell_json, measure)
    with open(out + ".tmp", "w") as f:
        json.dump(record, f, default=str)
    os.replace(out + ".tmp", out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cell", required=True, help="the cell as JSON (Cell.to_json)")
    parser.add_argument("--out", required=True, help="file to write the record to")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--max-seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    measure = {"warmup": args.warmup, "runs": args.runs, "max_seconds": args.max_seconds}
    run_to_file(json.loads(args.cell), args.out, measure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
