"""Reference-executor latency: whole compiled forwards and the largest engine of a model
run alone through ``run_snapshot``."""

from __future__ import annotations

import pytest
import torch

import torch_trt_ref
from torch_trt_ref.runtime.module import EngineModule
from torch_trt_ref.runtime.reference.executor import run_snapshot
from zoo.registry import get

from .conftest import pedantic

MODELS = ("bert_2layer", "gpt2_2layer")
_COMPILED: dict = {}


def compiled_model(name: str):
    """(compiled module, args, kwargs) of a zoo model, compiled once per session."""
    if name not in _COMPILED:
        entry = get(name)
        args, kwargs = entry.inputs()
        _COMPILED[name] = (torch_trt_ref.compile(entry.factory(), args, kwargs), args, kwargs)
    return _COMPILED[name]


@pytest.mark.parametrize("name", MODELS)
def test_compiled_forward(benchmark, name):
    compiled, args, kwargs = compiled_model(name)
    executors = set(torch_trt_ref.executors_used(compiled).values())
    assert executors == {"reference"}, f"{name}: expected reference-executor engines"
    benchmark.extra_info.update(normalize_by="torch", executor="reference", device="cpu")
    with torch.no_grad():
        pedantic(benchmark, lambda: compiled(*args, **kwargs), rounds=10, warmup_rounds=2)


@pytest.mark.parametrize("name", MODELS)
def test_largest_engine(benchmark, name):
    compiled, args, kwargs = compiled_model(name)
    engines = [m for m in compiled.modules() if isinstance(m, EngineModule)]
    assert engines, f"{name} compiled to no TensorRT engine"
    largest = max(engines, key=lambda m: m.engine.layer_count)
    captured = {}

    def capture_inputs(module, inputs):
        captured.update({s.name: v for s, v in zip(module.engine.inputs, inputs)})

    handle = largest.register_forward_pre_hook(capture_inputs)
    with torch.no_grad():
        compiled(*args, **kwargs)
    handle.remove()
    snapshot = largest.engine.snapshot
    benchmark.extra_info.update(normalize_by="torch", layers=largest.engine.layer_count)
    with torch.no_grad():
        pedantic(benchmark, lambda: run_snapshot(snapshot, captured), rounds=20,
                 warmup_rounds=2)
