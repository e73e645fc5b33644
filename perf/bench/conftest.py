"""Shared fixtures of the perf suites: zoo models and compiled modules, built once."""

from __future__ import annotations

import warnings

import pytest
import torch


def pytest_addoption(parser):
    parser.addoption("--perf-threads", type=int, default=1,
                     help="torch threads for the perf suites (1: stable on shared machines)")


def pytest_configure(config):
    threads = config.getoption("--perf-threads", default=None)
    if threads:
        torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def pedantic(benchmark, fn, rounds: int = 3, warmup_rounds: int = 0):
    """Run ``fn`` ``rounds`` times (one call each); returns its last result."""
    return benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=warmup_rounds)
