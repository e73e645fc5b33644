"""The zoo on Ray (zoo.ray_runner): a small matrix on a local Ray instance of 2 CPUs gives the
records of the local runner (engines, segments, ops, accuracy verdicts), says where each
cell ran, and survives a cell that kills its worker; without Ray, ``--ray`` says how to
install it."""

from __future__ import annotations

import os
import sys

import pytest

from zoo import compare as cmp
from zoo.harness import sweep
from zoo.matrix import matrix
from zoo.schema import read_records

MEASURE = {"warmup": 0, "runs": 1, "max_seconds": 1.0}
CELLS = matrix(["lgamma_graph", "bert_2layer"], ["fast", "global"], ["fp32"])


def _counts(records):
    """What must not depend on the runner: per cell, status and the exact counts."""
    out = {}
    for r in records:
        partition = {k: v for k, v in r.get("partition", {}).items()}
        out[r["cell"]["key"]] = (r["status"], r.get("engines", {}).get("count"),
                                 r.get("engines", {}).get("layers"), partition,
                                 r.get("ops"), (r.get("accuracy") or {}).get("passed"))
    return out


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_ray_sweep_matches_local_runner_and_survives_a_crashed_worker(tmp_path):
    from zoo.ray_runner import _run_cell_task, sweep_on_ray

    crashing = CELLS[1].key

    def body(cell_json, measure):  # pickled by value into the workers
        if cell_json["key"] == crashing:
            os._exit(3)  # the worker process dies mid-task, as a segfault would
        return _run_cell_task(cell_json, measure)

    ray_out, local_out = tmp_path / "ray.jsonl", tmp_path / "local.jsonl"
    seen = []
    sweep_on_ray(CELLS, ray_out, timeout=600, measure=MEASURE, progress=False,
                 num_cpus=2, task_body=body, on_record=lambda r: seen.append(r["cell"]["key"]))
    on_ray = read_records(ray_out)
    # written in the matrix order, whatever order the tasks finished in
    assert [r["cell"]["key"] for r in on_ray] == [c.key for c in CELLS] == seen
    crashed = [r for r in on_ray if r["status"] != "ok"]
    assert [(r["cell"]["key"], r["status"]) for r in crashed] == [(crashing, "crashed")]
    assert "WorkerCrashedError" in crashed[0]["error"]["type"]
    ok = [r for r in on_ray if r["status"] != "crashed"]
    assert all(r["env"]["runner"] == "ray" and r["env"]["pid"] and r["env"]["node"]
               for r in ok)
    assert len({r["env"]["pid"] for r in ok}) == len(ok)  # one fresh worker per cell

    sweep([c for c in CELLS if c.key != crashing], local_out, isolation="none",
          measure=MEASURE, progress=False)
    local = read_records(local_out)
    assert all(r["env"]["runner"] == "local" for r in local)
    assert _counts(ok) == _counts(local)
    # the zoo's own regression gate reads Ray records unchanged
    assert not cmp.regressions(cmp.compare(local, ok, counts_only=True))


def test_ray_option_without_ray_says_how_to_install(monkeypatch):
    from zoo.ray_runner import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ValueError, match=r'pip install -e "\.\[ray\]"'):
        import_ray()


def test_memory_request_grows_with_the_model_weights():
    from zoo.ray_runner import BASE_MEMORY_BYTES, memory_request, weight_bytes_estimate

    resnet = weight_bytes_estimate("resnet18")
    assert 40 * 2**20 < resnet < 50 * 2**20  # 11.7M fp32 parameters and BN buffers
    assert memory_request(None) == BASE_MEMORY_BYTES
    assert memory_request(resnet) > BASE_MEMORY_BYTES + 5 * resnet


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_opinfo_cells_on_ray_give_the_local_verdicts():
    from conformance.opinfo import CellKey
    from conformance.opinfo_report import run_all

    keys = [CellKey(op, "", dtype, 0) for op in ("abs", "sum") for dtype in ("fp32", "fp16")]
    local = run_all(keys, jobs=1)
    on_ray = run_all(keys, jobs=1, ray=True)
    verdicts = lambda cells: {c: v["outcome"] for c, v in cells.items()}  # noqa: E731
    assert verdicts(on_ray) == verdicts(local)
    assert set(verdicts(local).values()) == {"passed"}
