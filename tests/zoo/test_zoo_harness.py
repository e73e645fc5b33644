"""The harness on the smallest zoo model: a cell's record, a failing cell that does not
stop the sweep, and the subprocess timeout."""

import pytest

from zoo.harness import run_forked, run_in_process, run_in_subprocess, sweep
from zoo.matrix import Cell, matrix, quick_matrix
from zoo.schema import read_records


def test_quick_matrix_is_the_ci_subset():
    cells = quick_matrix()
    # 5 models x 2 strategies x 2 precisions, 3 more models x fast x 2 precisions, and the 5
    # text models with a dynamic sequence length (fast, fp32), one int8 and one fp8 cell, and
    # one decoder-LLM cell (llm:gpt2, fp32)
    assert len(cells) == 5 * 2 * 2 + 3 * 2 + 5 + 2 + 1
    assert {c.strategy for c in cells} == {"fast", "dependency_aware"}
    assert {c.precision for c in cells} == {"fp32", "fp16", "int8", "fp8"}
    assert len({c.key for c in cells}) == len(cells)


def test_matrix_rejects_unknown_strategy():
    with pytest.raises(ValueError, match="dependency_aware"):
        matrix(["resnet18"], ["greedy"])


def test_failing_cell_is_recorded_and_the_sweep_goes_on(tmp_path):
    out = tmp_path / "zoo.jsonl"
    cells = [Cell("no_such_model", "fast", "fp32"),
             Cell("lgamma_graph", "dependency_aware", "fp32")]
    records = sweep(cells, out, isolation="none", progress=False,
                    measure={"warmup": 0, "runs": 3, "max_seconds": 1.0})
    assert [r["cell"]["key"] for r in read_records(out)] == [c.key for c in cells]
    bad, good = records
    assert bad["status"] == "error"
    assert bad["error"]["stage"] == "build_model" and bad["error"]["type"] == "KeyError"
    assert good["run_id"] == bad["run_id"]
    assert "torch" in good["env"] and "tensorrt" in good["env"]
    # lgamma graph: add, lgamma, mul, lgamma, div, lgamma, cat = 7 compute nodes
    assert good["status"] == "ok", good["error"]
    assert good["ops"]["total"] == 7
    assert good["ops"]["unsupported"].get("aten.lgamma.default") == 3
    assert good["settings"]["min_block_size"] == 1  # the entry's compile_settings apply
    # seed 000's dependency-aware plan: TRT(add, mul, div) -> Torch(3 x lgamma) -> TRT(cat)
    assert good["partition"] == {"engines": 2, "torch_segments": 1, "transitions": 2,
                                 "planned_tensorrt_segments": 2, "fallbacks": {}}
    assert good["accuracy"]["passed"], good["accuracy"]
    assert good["latency"]["runs"] >= 3


@pytest.mark.parametrize("runner", [run_in_subprocess, run_forked])
def test_timeout_becomes_a_record(runner):
    record = runner(Cell("lgamma_graph", "fast", "fp32"), timeout=0.01)
    assert record["status"] == "timeout"
    assert record["error"]["type"] == "TimeoutExpired"


def test_forked_cell_matches_the_in_process_record():
    cell = Cell("lgamma_graph", "dependency_aware", "fp32")
    measure = {"warmup": 0, "runs": 3, "max_seconds": 1.0}
    forked = run_forked(cell, timeout=600, measure=measure)
    assert forked["status"] == "ok", forked["error"]
    assert forked["memory"]["peak_rss_bytes"] >= 0
    local = run_in_process(cell, measure=measure)
    assert forked["partition"] == local["partition"] and forked["ops"] == local["ops"]
