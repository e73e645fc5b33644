"""Multi-profile conformance cells: for the first float32 case of each case module with a
dim that really varies in its dynamic variant,
one engine with two optimization profiles (``Input(profiles=...)``), each profile pinned
(``runtime.optimization_profile``) and run at its opt, min and max shapes on the reference
executor, judged by the float64 rule like every cell."""

from __future__ import annotations

import importlib

import pytest
import torch

from .runner import _inputs, case_modules, cells, run_cell


def _first_dynamic_cells():
    for name in case_modules():
        module_cases = getattr(importlib.import_module(name), "CASES", [])
        for cell_id, case, dtype, dynamic in cells(module_cases):
            varies = dynamic and any(lo != hi for _, lo, hi in _inputs(case, True)[0])
            if varies and dtype == torch.float32 and not case.xfail_reason(dtype, dynamic):
                yield pytest.param(case, id=cell_id.replace("-dynamic", "-profiles"))
                break


@pytest.mark.parametrize("case", list(_first_dynamic_cells()))
def test_two_profiles(case):
    run_cell(case, torch.float32, True, profiles=True)
