"""Zoo programs saved without their engine weights (zoo/weightless.py, issue 27): the file
shrinks to the program's structure and its computed constants, and after ``restore`` (refit
from the zoo model rebuilt from its seed) the loaded program gives the outputs of the
program saved whole; ``zoo latency --repeats`` alternates its variants round by round and
the table shows the spread of the rounds."""

from __future__ import annotations

import contextlib
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


def test_rounds_alternate_the_variants_under_their_graph_settings(monkeypatch):
    seen, medians = [], iter([3.0, 1.0, 2.0, 1.5, 2.5, 1.2])
    monkeypatch.setattr(gpu_latency, "cuda_latency", lambda fn, warmup, runs: (
        fn(), {"median_ms": next(medians), "p90_ms": 9.0})[1])

    @contextlib.contextmanager
    def graphs(on):
        seen.append(("on" if on else "off"))
        yield

    variants = {"eager": (lambda: seen.append("eager"), False),
                "ours": (lambda: seen.append("ours"), True)}
    times = gpu_latency._alternate(variants, 1, 1, 3, graphs)
    assert seen == ["off", "eager", "on", "ours"] * 3
    assert times["eager"]["median_ms"] == 2.5 and times["eager"]["round_medians_ms"] == [
        3.0, 2.0, 2.5]
    assert times["ours"]["median_ms"] == 1.2


def test_latency_times_the_anchors_and_says_which_could_not_run(tmp_path, monkeypatch):
    # issue 42: torch.compile's modes beside ours; an anchor that cannot run (no C++
    # compiler for CPU code, say) is named with its reason, and the record still stands
    from torch_trt_ref.runtime.reference import compiled_replay

    monkeypatch.setattr(compiled_replay, "BACKEND", "aot_eager")  # no C++ builds in CI
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (path,) = gpu_latency.save_programs(["lgamma_graph"], ["fp32"], [1], tmp_path,
                                           plans=False, log=lambda line: None)

    def anchor_call(model, anchor, args, kwargs):
        if anchor == "inductor":
            raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nmore")
        return lambda: model(*args, **kwargs)

    calls = []
    monkeypatch.setattr(gpu_latency, "anchor_call", anchor_call)
    monkeypatch.setattr(gpu_latency, "cuda_latency", lambda fn, warmup, runs: (
        calls.append(fn()), {"median_ms": 1.0 + len(calls), "p90_ms": 9.0})[1])
    record = gpu_latency.measure_program(path, "cpu", 1, 1, gpu_latency.ANCHORS,
                                         log=lambda line: None)
    assert record["status"] == "ok", record.get("error")
    assert record["accuracy"]["passed"] and record["accuracy"]["graphed_inductor"]["passed"]
    assert set(record["latency"]) == {"eager", "ours_no_graphs", "ours_engine_graphs",
                                      "ours_inductor_graphs", "ours_whole_graph",
                                      "reduce_overhead", "max_autotune"}
    assert record["anchors_failed"] == {
        "inductor": "RuntimeError: InvalidCxxCompiler: No working C++ compiler found"}
    assert all(all(v) for v in record["replays_compiled"].values())
    table = gpu_latency.markdown([record])
    assert "| could not run (RuntimeError: InvalidCxxCompiler: No working C++ compiler " \
        "found) |" in table
    # best ours is the first of ours timed (median 3.0 ms); reduce-overhead the 6th (7.0)
    assert "| 0.43x | 0.38x | ours_no_graphs |" in table
    assert "inductor could not run" in gpu_latency.summary_line(record)
