"""The parametrized conformance runner and the coverage meta-test."""

from __future__ import annotations

import pytest

from torch_trt_ref.conversion.registry import CONVERTERS, USER_PRIORITY
from torch_trt_ref.settings import op_name

from .runner import all_cases, cells, run_cell

CELLS = list(cells(all_cases()))


def _param(cell_id, case, dtype, dynamic):
    reason = case.xfail_reason(dtype, dynamic)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(case, dtype, dynamic, id=cell_id, marks=marks)


@pytest.mark.parametrize("case,dtype,dynamic", [_param(*c) for c in CELLS])
def test_op(case, dtype, dynamic, request, record_property):
    accuracy: dict = {}
    try:
        run_cell(case, dtype, dynamic, accuracy)
    except BaseException as err:
        cell = request.node.callspec.id
        command = f'python -m pytest "conformance/test_conformance.py::test_op[{cell}]"'
        raise AssertionError(f"{type(err).__name__}: {err}\nreproduce: {command}") from err
    finally:  # errors vs float64 for the JSON report (conftest.py)
        record_property("accuracy", accuracy)


def test_every_converter_has_a_case():
    """Every converter the library ships; converters users register at run time
    (``conversion.plugin``, user priority: docs/converters.md's example registers one in
    the process that runs the docs) are theirs to test."""
    covered = {op_name(c.target) for c in all_cases()} | {op_name(c.op) for c in all_cases()}
    shipped = [t for t in CONVERTERS.aten_overloads()
               if any(s.priority != USER_PRIORITY for s in CONVERTERS.candidates(t))]
    missing = sorted(op_name(t) for t in shipped if op_name(t) not in covered)
    assert not missing, f"converters without a conformance case: {missing}"
