"""Calibration workloads: fixed amounts of torch and pure-Python work. ``perf.bench.run``
divides every benchmark of the same run by one of them (``perf.bench.ratios``), so numbers
from one run read as multiples of a known workload."""

from __future__ import annotations

import torch

from .conftest import pedantic


def torch_matmul_loop(n: int = 256, steps: int = 40) -> torch.Tensor:
    """A fixed torch workload: ``steps`` dense n x n matmuls with a tanh in between."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g)
    x = torch.randn(n, n, generator=g)
    for _ in range(steps):
        x = torch.tanh(a @ x)
    return x


def python_loop(steps: int = 200_000) -> int:
    """A fixed interpreter-bound workload (dicts, attribute-free arithmetic, strings): the
    kind of work graph capture, lowering and partitioning spend their time on."""
    table: dict[str, int] = {}
    total = 0
    for i in range(steps):
        key = f"n{i % 997}"
        table[key] = table.get(key, 0) + i
        total += len(key)
    return total + len(table)


def test_calibration_torch(benchmark):
    benchmark.extra_info["calibration"] = "torch"
    pedantic(benchmark, torch_matmul_loop, rounds=5, warmup_rounds=1)


def test_calibration_python(benchmark):
    benchmark.extra_info["calibration"] = "python"
    pedantic(benchmark, python_loop, rounds=5, warmup_rounds=1)
