"""The ``torch_trt_ref`` backend of ``python -m conformance``: the same cells through our own
compiler (``runner.run_cell``, ``opinfo.run_cell``), with the peer backend's outcomes."""

from __future__ import annotations

from . import opinfo, runner
from .opinfo import Outcome


def run_case_cell(case, dtype, dynamic) -> Outcome:
    try:
        runner.run_cell(case, dtype, dynamic)
    except AssertionError as err:
        return Outcome("mismatch", str(err).strip().replace("\n", " ")[:400])
    except Exception as err:
        return Outcome("convert_error", f"{type(err).__name__}: {err}"[:400])
    return Outcome("passed")


def run_opinfo_cell(key) -> Outcome:
    out = opinfo.run_cell(key)
    if out.outcome == "compile_error":
        out.outcome = "convert_error"
    return out
