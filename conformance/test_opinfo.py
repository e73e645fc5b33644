"""OpInfo cells as one parametrized test: each compiles one op_db sample fully to TensorRT
and judges the reference executor's result against eager float64. By default the CI
subset (the manifest's converted cells, first samples); TORCH_TRT_REF_OPINFO=full runs
every OpInfo, dtype and sample."""

from __future__ import annotations

import os

import pytest

from .opinfo import FULL_SAMPLES, CellKey, cell_keys, ci_keys, op_db, run_cell
from .opinfo_xfail import XFAIL

FULL = os.environ.get("TORCH_TRT_REF_OPINFO") == "full"
KEYS = cell_keys(FULL_SAMPLES) if FULL else ci_keys()
NOT_COUNTED = ("not_converted", "not_exported", "skipped", "absent")


def _param(key: CellKey):
    # one xdist group per OpInfo: its samples are made once, by one worker
    marks = [pytest.mark.xdist_group(f"opinfo-{key.op}")]
    if key.id in XFAIL:
        marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[key.id]))
    return pytest.param(key, id=key.id, marks=marks)


@pytest.mark.parametrize("key", [_param(k) for k in KEYS])
def test_opinfo(key: CellKey):
    outcome = run_cell(key)
    if outcome.outcome in NOT_COUNTED:
        pytest.skip(f"{outcome.outcome}: {outcome.message}")
    env = "TORCH_TRT_REF_OPINFO=full " if FULL else ""
    assert outcome.outcome == "passed", (
        f"{outcome.outcome}: {outcome.message}\nreproduce: {env}python -m pytest "
        f'"conformance/test_opinfo.py::test_opinfo[{key.id}]"')


def test_xfail_table_names_real_cells():
    known = set(op_db())
    for cell_id in XFAIL:
        key = CellKey.parse(cell_id)
        assert (key.op, key.variant) in known, f"{cell_id}: no such OpInfo in op_db"
        assert 0 <= key.index < FULL_SAMPLES, f"{cell_id}: sample index out of range"
