"""Compile time per zoo model (the quick subset, fp32, default "fast" strategy), with the
best (minimum) time of each phase kept in the benchmark's extra_info."""

from __future__ import annotations

import pytest

import torch_trt_ref
from zoo.registry import QUICK, get

from .conftest import pedantic

ROUNDS = {"mobilenet_v2": 2, "resnet18": 2}


@pytest.mark.parametrize("name", QUICK)
def test_compile(benchmark, name):
    entry = get(name)
    model = entry.factory()
    args, kwargs = entry.inputs()
    reports = []

    def compile_once():
        compiled = torch_trt_ref.compile(model, args, kwargs)
        reports.append(compiled.compile_report)
        return compiled

    compiled = pedantic(benchmark, compile_once, rounds=ROUNDS.get(name, 3))
    phases = {p: min(r.phases[p] for r in reports) for p in reports[0].phases}
    benchmark.extra_info.update(
        normalize_by="python", phases=phases,
        engines=len(compiled.compile_report.engines),
        outside_builder_seconds=min(r.seconds_outside_builder() for r in reports))
