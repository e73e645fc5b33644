"""Zoo programs saved without their engine weights (zoo/weightless.py, issue 27): the file
shrinks to the program's structure and its computed constants, and after ``restore`` (refit
from the zoo model rebuilt from its seed) the loaded program gives the outputs of the
program saved whole; the latency table shows the spread of its timing rounds."""

from __future__ import annotations

import warnings

import torch

import torch_trt_ref
from zoo import gpu_latency, weightless
from zoo.registry import get


def test_a_program_saved_without_weights_is_small_and_refits_to_the_whole_one(tmp_path):
    entry = get("bert_2layer")
    args, kwargs = entry.inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = torch_trt_ref.compile(entry.factory(), args, kwargs, executor="reference")
    whole = torch_trt_ref.save(compiled, tmp_path / "whole.prog", plans=False)
    left_out = weightless.strip(compiled, entry.factory())
    slim = torch_trt_ref.save(compiled, tmp_path / "slim.prog", plans=False)
    assert left_out > 10 * 2**20 and slim.stat().st_size < 2**20
    assert whole.stat().st_size - slim.stat().st_size > 0.9 * left_out
    loaded = torch_trt_ref.load(slim)
    with torch.no_grad():
        stripped = loaded(*args, **kwargs)
        weightless.restore(loaded, entry.factory())
        got = loaded(*args, **kwargs)
        want = torch_trt_ref.load(whole)(*args, **kwargs)
    leaves = torch.utils._pytree.tree_leaves
    assert all(torch.equal(a, b) for a, b in zip(leaves(got), leaves(want)))
    assert not all(torch.equal(a, b) for a, b in zip(leaves(stripped), leaves(want)))


def test_the_latency_table_gives_the_spread_of_the_rounds():
    lat = {"eager": {"median_ms": 2.0, "p90_ms": 2.2, "round_medians_ms": [2.1, 2.0, 1.9]},
           "ours_engine_graphs": {"median_ms": 0.5, "p90_ms": 0.6}}
    record = {"program": "m-fp32-b1.prog", "status": "ok", "executors": ["reference"],
              "latency": lat, "accuracy": {"passed": True, "ratio": 1.0}, "env": {}}
    table = gpu_latency.markdown([record])
    assert "| 2.000 / 2.200 (1.900-2.100) |" in table
    assert "| 0.500 / 0.600 |" in table
