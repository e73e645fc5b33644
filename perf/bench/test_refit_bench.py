"""Refit vs compile (issue 12: a refit must take < 20% of a compile): refit of a compiled
zoo model to new weights, with the best compile time of the same model and their ratio in
the benchmark's extra_info (``refit_to_compile``)."""

from __future__ import annotations

import time

import pytest
import torch

import torch_trt_ref
from zoo.registry import get

from .conftest import pedantic

MODELS = ("resnet18", "bert_2layer")


def _new_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every floating-point weight scaled by a random factor in [1, 1.05) (signs kept, so
    batch-norm variances stay positive)."""
    generator = torch.Generator().manual_seed(1)
    return {k: v * (1 + 0.05 * torch.rand(v.shape, generator=generator))
            if v.is_floating_point() else v for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name", MODELS)
def test_refit(benchmark, name):
    entry = get(name)
    model = entry.factory()
    args, kwargs = entry.inputs()
    compile_seconds, compiled = [], None
    for _ in range(2):
        start = time.perf_counter()
        compiled = torch_trt_ref.compile(model, args, kwargs)
        compile_seconds.append(time.perf_counter() - start)
    states = [_new_weights(model), model.state_dict()]  # alternate: each refit changes all
    rounds = iter(range(10**6))
    pedantic(benchmark, lambda: torch_trt_ref.refit(compiled, states[next(rounds) % 2]),
             rounds=6)
    refit_seconds = benchmark.stats.stats.min
    benchmark.extra_info.update(
        normalize_by="python", compile_seconds=min(compile_seconds),
        refit_to_compile=refit_seconds / min(compile_seconds),
        engines=len(compiled.compile_report.engines))
